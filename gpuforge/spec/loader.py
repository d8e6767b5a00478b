"""The one YAML reader for stack files: UTF-8, YAML 1.2 scalars, no duplicate keys, bounded.

PyYAML speaks YAML 1.1, where `yes`/`no`/`on`/`off` are booleans, `2026-02-30` is a date that
crashes the constructor and `010` is octal. Pulumi reads stack files with Go's yaml.v3, which
hands the program YAML 1.2 values (`yes` and dates stay text). This reader resolves plain
scalars the YAML 1.2 core way, so gpuforge validates what the engine will see, and every
mapping and list remembers, per key, the line and the text a scalar was written as: error
messages can then say "YAML reads 0x0010 as the number 16; quote it".

Everything wrong with the file itself (encoding, syntax, duplicate keys, size, depth, alias
bombs) is one SpecError naming the file, the line and the fix.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import SpecError, SpecIssue

MAX_BYTES = 4 * 1024 * 1024  # a stack file with a 1,000-host site is ~300 KB
MAX_DEPTH = 64  # the spec nests ~8 deep; anything near this is a generated or broken file
MAX_VALUES = 200_000  # values after expanding aliases (a "billion laughs" file expands past any memory)

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), as yaml.v3 resolves it.
_CORE_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    ("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
        "-+0123456789.",
    ),
]


_LEADING_ZERO = re.compile(r"^[-+]?0[0-9]+$")
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "str", "map", "seq")
)


class _Resolver(yaml.resolver.Resolver):
    yaml_implicit_resolvers = {}  # noqa: RUF012  (own table: no YAML 1.1 resolvers inherited)


for _tag, _pattern, _first in _CORE_RESOLVERS:
    _Resolver.add_implicit_resolver(_tag, _pattern, list(_first))
# YAML's merge key (`<<: *defaults`) stays available.
_Resolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


class _Constructor(yaml.constructor.SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if text.startswith("0o"):
            return int(text[2:], 8)
        return int(text, 0) if text.startswith("0x") else int(text, 10)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)  # type: ignore[type-var]


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _Constructor,
    _Resolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # The composer recurses per level; stop well before Python's recursion limit.
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


try:  # libyaml: ten times faster; its composer recurses in C, so depth is checked on the events first
    from yaml._yaml import CParser

    class _CLoader(CParser, _Constructor, _Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

except ImportError:  # PyYAML built without libyaml
    _CLoader = None  # type: ignore[assignment,misc]


def _check_depth(text: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark  # type: ignore[arg-type]
                )
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def _make_loader(text: str) -> Any:
    if _CLoader is None:
        return _Loader(text)
    _check_depth(text)
    return _CLoader(text)


class YamlMap(dict[Any, Any]):
    """A mapping that remembers, per key, the line of its value and how a non-text scalar was written."""

    lines: dict[Any, int]
    written: dict[Any, str]


class YamlList(list[Any]):
    """A list that remembers the line of each item and how a non-text scalar item was written."""

    lines: dict[int, int]
    written: dict[int, str]


def read_stack_text(path: Path) -> str:
    """The file's text, or a SpecError saying how to save it (UTF-8, no byte-order mark)."""
    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SpecError(
                [SpecIssue("file", f"{size:,} bytes; a stack file is at most {MAX_BYTES:,}", "split or trim the file")],
                source,
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError([SpecIssue("file", f"cannot be read: {exc.strerror}", "check the path")], source) from None
    return decode_stack(raw, source)


def decode_stack(raw: bytes, source: str = "") -> str:
    """UTF-8 text, or a SpecError saying how to save the file."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)) or (
        b"\x00" in raw[:64]
    ):
        raise SpecError(
            [SpecIssue("file", "is UTF-16 or UTF-32 (as some Windows shells write it)", "save it as UTF-8")], source
        )
    if raw.startswith(codecs.BOM_UTF8):
        raise SpecError(
            [SpecIssue("file", "starts with a byte-order mark (U+FEFF)", "save it as UTF-8 without BOM")], source
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        byte = raw[exc.start : exc.start + 1].hex()
        raise SpecError(
            [
                SpecIssue(
                    f"file line {line}",
                    f"byte 0x{byte} is not UTF-8 (the file looks Latin-1 or Windows-1252 encoded)",
                    "save it as UTF-8",
                )
            ],
            source,
        ) from None


def parse_yaml(text: str, source: str = "") -> Any:
    """One YAML document as YamlMap/YamlList/scalars; a SpecError for anything wrong with the text."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise SpecError([SpecIssue("file", f"larger than {MAX_BYTES:,} bytes", "split or trim the file")], source)
    try:
        loader = _make_loader(text)
    except yaml.reader.ReaderError as exc:
        return _reader_error(exc, text, source)
    except yaml.MarkedYAMLError as exc:
        raise SpecError([_syntax_issue(exc, text)], source) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return _Builder(loader, source).build(node)
    except yaml.MarkedYAMLError as exc:
        raise SpecError([_syntax_issue(exc, text)], source) from None
    except yaml.reader.ReaderError as exc:
        return _reader_error(exc, text, source)
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue("file", f"not valid YAML: {exc}", "fix the YAML syntax")], source) from None
    finally:
        loader.dispose()


def _reader_error(exc: yaml.reader.ReaderError, text: str, source: str) -> NoReturn:
    """A control character YAML does not allow, with its line."""
    line = text[: exc.position].count("\n") + 1
    raise SpecError(
        [
            SpecIssue(
                f"file line {line}",
                f"contains the control character U+{exc.character:04X}, which YAML does not allow",
                "delete it (it is invisible in most editors; a hex view shows it)",
            )
        ],
        source,
    ) from None


def _syntax_issue(exc: yaml.MarkedYAMLError, text: str) -> SpecIssue:
    mark = exc.problem_mark or exc.context_mark
    line = f"file line {mark.line + 1}" if mark is not None else "file"
    problem = (exc.problem or exc.context or "not valid YAML").replace(repr("\t"), "a tab")
    lines = text.splitlines()
    if mark is not None and mark.line < len(lines) and lines[mark.line][mark.column : mark.column + 1] == "\t":
        problem += " (a tab)"
    return SpecIssue(line, f"not valid YAML: {problem}", _syntax_fix(problem))


def _syntax_fix(problem: str) -> str:
    if "tab" in problem:
        return "indent with spaces, not tabs"
    if "leading zero" in problem:
        return "write the number without the leading zero (or quote it if it is text)"
    if "is not supported" in problem:
        return "remove the tag and write the plain value"
    if "nested more than" in problem:
        return f"flatten the document; the spec never nests more than {MAX_DEPTH} levels"
    if "expected <document start>" in problem or "but found another document" in problem:
        return "keep one YAML document per stack file (remove the extra ---)"
    if "mapping values are not allowed" in problem:
        return "put a space after every colon, or quote a value that contains ': '"
    return "fix the YAML syntax at that line (check indentation, quotes and colons)"


class _Builder:
    """Node tree -> Python values, with duplicate-key, size and source-position bookkeeping."""

    def __init__(self, loader: Any, source: str) -> None:
        self.loader = loader
        self.source = source
        self.values = 0

    def build(self, node: Node, path: str = "", depth: int = 0) -> Any:
        self.values += 1
        if depth > MAX_DEPTH:  # an alias inside its own anchor (`&a [*a]`) nests forever
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep (an alias inside itself?)", node.start_mark
            )
        if node.tag not in _PLAIN_TAGS:
            raise yaml.constructor.ConstructorError(
                None, None, f"the YAML tag {node.tag} is not supported in a stack file", node.start_mark
            )
        if self.values > MAX_VALUES:
            raise SpecError(
                [
                    SpecIssue(
                        "file",
                        f"more than {MAX_VALUES:,} values once YAML aliases are expanded",
                        "remove the aliases that repeat large blocks (*name)",
                    )
                ],
                self.source,
            )
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            items = YamlList()
            items.lines, items.written = {}, {}
            for i, child in enumerate(node.value):
                items.append(self.build(child, f"{path}[{i}]", depth + 1))
                self._remember(items, i, child)
            return items
        return self._scalar(node)

    def _scalar(self, node: Node) -> Any:
        plain = isinstance(node, ScalarNode) and not node.style
        if plain and node.tag == "tag:yaml.org,2002:int" and _LEADING_ZERO.match(str(node.value)):
            text = str(node.value)
            octal = f" ({int(text, 8)})" if set(text.lstrip("+-")) <= set("01234567") else ""
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"{text} has a leading zero, which YAML 1.1 tools read as octal{octal} and YAML 1.2 ones as "
                f"decimal ({int(text, 10)})",
                node.start_mark,
            )
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:  # e.g. `!!int x`, an int of 5,000 digits
            text = str(node.value) if len(str(node.value)) < 40 else f"{str(node.value)[:37]}..."
            raise yaml.constructor.ConstructorError(None, None, f"{text!r}: {str(exc)[:80]}", node.start_mark) from None

    def _mapping(self, node: MappingNode, path: str, depth: int) -> YamlMap:
        own = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
        self.loader.flatten_mapping(node)  # resolves `<<` merge keys (own keys win over merged ones)
        merged = len(node.value) - own  # flatten_mapping puts the merged pairs first
        out = YamlMap()
        out.lines, out.written = {}, {}
        explicit: dict[Any, int] = {}
        for index, (key_node, value_node) in enumerate(node.value):
            if not isinstance(key_node, ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be plain text, not a list or mapping", key_node.start_mark
                )
            key = self._scalar(key_node)
            line = key_node.start_mark.line + 1
            from_merge = index < merged
            if key in explicit and not from_merge:
                first = explicit[key]
                raise SpecError(
                    [
                        SpecIssue(
                            f"file line {line}",
                            f"key {key!r}{f' under {path.lstrip(chr(46))}' if path else ''} appears twice "
                            f"(first on line {first}); YAML would silently keep only the last one",
                            "merge the two entries into one, or rename one of them",
                        )
                    ],
                    self.source,
                )
            if not from_merge:
                explicit[key] = line
            out[key] = self.build(value_node, f"{path}.{key}", depth + 1)
            self._remember(out, key, value_node)
        return out

    @staticmethod
    def _remember(container: YamlMap | YamlList, key: Any, node: Node) -> None:
        container.lines[key] = node.start_mark.line + 1
        if isinstance(node, ScalarNode) and not node.style and node.tag != "tag:yaml.org,2002:str":
            container.written[key] = node.value
