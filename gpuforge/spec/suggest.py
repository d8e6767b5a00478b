"""Did-you-mean and look-alike characters, for every message that names something unknown."""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Iterable

# Letters that render like ASCII ones (Unicode's confusables, the ones keyboards and chat tools
# actually produce); NFKC covers fullwidth and compatibility forms.
_CONFUSABLES = {
    # Cyrillic letters, then Greek ones, that render like Latin letters
    **dict(zip(
        "\u0430\u0435\u043e\u0440\u0441\u0445\u0443\u0456\u0458\u0455\u0501\u051b\u051d\u043a\u043c\u0442\u0432\u043d"
        "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0406\u0408\u0405",
        "aeopcxyijsdqwkmtbhABEKMHOPCTXYIJS",
        strict=True,
    )),
    **dict(zip(
        "\u03bf\u03b1\u03b5\u03bd\u03c1\u03c4\u03b9\u03ba\u03c7\u0391\u0392\u0395"
        "\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7",
        "oaevptikxABEZHIKMNOPTYX",
        strict=True,
    )),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2009\u202f\u3000", " "),
    **dict.fromkeys("\u2018\u2019\u201a\u2032", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u2033", '"'),
}
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad")


def ascii_lookalike(text: str) -> str | None:
    """The ASCII text a string with look-alike characters was meant to be; None if it is ASCII
    already or has a character that resembles nothing ASCII."""
    if text.isascii():
        return None
    out = []
    for char in text:
        if char.isascii():
            out.append(char)
        elif char in _INVISIBLE:
            continue
        elif char in _CONFUSABLES:
            out.append(_CONFUSABLES[char])
        else:
            folded = unicodedata.normalize("NFKC", char)
            if not folded.isascii():
                return None
            out.append(folded)
    return "".join(out)


def unusual_characters(text: str) -> str:
    """' (it contains U+0430 CYRILLIC SMALL LETTER A where 'a' was likely meant)', or ''."""
    notes = []
    for char in dict.fromkeys(c for c in text if not c.isascii()):
        name = unicodedata.name(char, "an unnamed character")
        meant = "" if char in _INVISIBLE else _CONFUSABLES.get(char) or unicodedata.normalize("NFKC", char)
        if char in _INVISIBLE:
            notes.append(f"an invisible U+{ord(char):04X} {name}")
        elif meant.isascii():
            notes.append(f"U+{ord(char):04X} {name}, which looks like {meant!r}")
        else:
            notes.append(f"U+{ord(char):04X} {name}")
    return f" (it contains {', '.join(notes[:3])}: retype it in plain ASCII)" if notes else ""


def did_you_mean(value: object, choices: Iterable[str], n: int = 3) -> list[str]:
    """Choices close to value: exact up to case or look-alike characters first, then by spelling."""
    if not isinstance(value, str):
        value = str(value)
    options = list(dict.fromkeys(choices))
    plain = (ascii_lookalike(value) or value).strip()
    folded = {c.casefold(): c for c in options}
    if plain.casefold() in folded:
        return [folded[plain.casefold()]]
    for key, choice in folded.items():
        if plain.casefold().replace("_", "-") == key.replace("_", "-"):
            return [choice]
    swapped = [c for key, c in folded.items() if sorted(key) == sorted(plain.casefold())]
    if len(swapped) == 1:  # letters swapped (us-esat-1): the one choice with the same letters
        return swapped
    hits = difflib.get_close_matches(plain.casefold(), list(folded), n=n, cutoff=0.6)
    return [folded[h] for h in hits]


def suggestion(value: object, choices: Iterable[str]) -> str:
    """'did you mean p5.48xlarge?' or ''."""
    hits = did_you_mean(value, choices)
    return f"did you mean {' or '.join(hits)}?" if hits else ""


def shown(value: object, limit: int = 60) -> str:
    """A value as the message shows it: text quoted, long values cut."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, dict | list):
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):  # a key that is not text
            text = str(value)
        if len(text) > limit:
            return ("a mapping" if isinstance(value, dict) else "a list") + f" of {len(value)}"
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
