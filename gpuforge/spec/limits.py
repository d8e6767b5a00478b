"""Format checks of the strings and numbers a stack hands to other services, against their limits as
the catalog records them (gpuforge/catalog/data/spec_limits.yaml, each with its source).

Each check returns None for a value the service takes, else "what is wrong (source); the fix", the
form pydantic validators raise and errors.py splits into message and fix. No message quotes a value
that might be a secret; the values checked here are names, addresses and schedules.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from gpuforge.catalog.spec_limits import spec_limits


def refusing(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    """A pydantic AfterValidator from a check: the value when the check finds nothing, else its problem."""

    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value

    return check


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.*)\)$")


# Addresses the Internet never routes to a customer: RFC 1918 private, RFC 6598 shared (carrier NAT), loopback,
# link-local, multicast, unspecified and reserved. The RFC 5737 documentation ranges the examples use pass.
_NOT_ROUTED = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "224.0.0.0/4", "0.0.0.0/8", "240.0.0.0/4",
))


def _not_routed(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return any(network.overlaps(n) for n in _NOT_ROUTED if n.version == network.version)


def port_problem(port: int | None, what: str) -> str | None:
    if port is not None and not 1 <= port <= 65535:
        return f"port {port} of the {what} is outside 1-65535 (a TCP port is 16 bits, 0 is reserved); write a real port"
    return None


def email_problem(address: str) -> str | None:
    """RFC 5321's size limits on a mailbox: local part, domain, and the whole <path>."""
    limits = spec_limits().email
    local, _, domain = address.rpartition("@")
    octets = len(local.encode()), len(domain.encode()), len(address.encode()) + 2
    if octets[0] > limits.local_part_octets:
        return (f"the part before @ is {octets[0]} octets; {limits.source} allows {limits.local_part_octets}; "
                "shorten it")
    if octets[1] > limits.domain_octets:
        return f"the domain is {octets[1]} octets; {limits.source} allows {limits.domain_octets}; shorten it"
    if octets[2] > limits.path_octets:
        return (f"the address is {octets[2] - 2} octets; {limits.source} allows a path of {limits.path_octets} "
                "with its angle brackets; shorten it")
    if ".." in domain or domain.startswith(".") or domain.endswith(".") or "." not in domain:
        return "the domain is not a host name (labels separated by single dots); write it like example.com"
    return None


def slack_channel_problem(channel: str) -> str | None:
    """A #channel as Slack names channels (a @user is left to Slack)."""
    limits = spec_limits().slack
    if not channel.startswith("#"):
        return None
    name = channel[1:]
    if re.fullmatch(limits.channel_name_pattern, name):
        return None
    fixed = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")[:80]
    return (f"Slack channel names are lowercase letters, digits, - and _, at most 80 characters ({limits.source}); "
            f"write #{fixed or 'alerts'}")


def kubernetes_label_problem(key: str, value: str) -> str | None:
    """A metadata label as the Kubernetes API server takes it."""
    limits = spec_limits().kubernetes_labels
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > limits.prefix_max or not re.fullmatch(limits.prefix_pattern, prefix)):
        return f"label {key!r}: its prefix is not a DNS subdomain ({limits.source}); write it like example.com/name"
    if not re.fullmatch(limits.name_pattern, name):
        return (f"label {key!r}: a label name is 1-63 letters, digits, - _ . starting and ending with a letter "
                f"or digit ({limits.source}); rename it")
    if value and not re.fullmatch(limits.name_pattern, value):
        return (f"label {key!r}: its value is not a label value (up to 63 letters, digits, - _ ., starting and ending "
                f"with a letter or digit; {limits.source}); rewrite the value")
    return None


def rds_class_problem(value: str) -> str | None:
    limits = spec_limits().rds
    if re.fullmatch(limits.instance_class_pattern, value):
        return None
    hint = f"db.{value}" if re.fullmatch(limits.instance_class_pattern, f"db.{value}") else "db.t4g.medium"
    return f"{value!r} is not an RDS DB instance class ({limits.source}); write it like {hint}"


def customer_gateway_problem(address: str, asn: int, region: str | None) -> list[tuple[str, str]]:
    """(field, problem) for a VPN customer gateway: an Internet-routable address, an ASN AWS does not reserve."""
    limits = spec_limits().aws.customer_gateway
    problems: list[tuple[str, str]] = []
    if _not_routed(ipaddress.ip_network(address)):
        problems.append((
            "ip_address",
            f"{address} is not an Internet-routable address (private, shared, loopback or reserved): the VPN "
            f"tunnels come from AWS over the Internet ({limits.source}); use the public address of the site's VPN "
            "device (its NAT's, if it is behind one)",
        ))
    reserved = limits.reserved_asns.get(asn)
    if reserved is not None and reserved == (region or reserved):
        problems.append((
            "bgp_asn",
            f"ASN {asn} is reserved by AWS in {reserved} ({limits.source}); use the site's own ASN or a private one "
            "(64512-65534)",
        ))
    return problems


def eks_public_cidrs_problem(cidrs: list[str]) -> str | None:
    limits = spec_limits().aws.eks
    if len(cidrs) > limits.public_access_cidrs_max:
        return (f"{len(cidrs)} public access CIDRs; EKS takes at most {limits.public_access_cidrs_max} per cluster "
                f"({limits.source}); merge ranges into fewer blocks")
    for cidr in cidrs:
        if _not_routed(ipaddress.ip_network(cidr, strict=False)):
            return (f"{cidr} is a private or reserved range: the public endpoint is reached from the Internet, "
                    f"where no such address arrives ({limits.source}); list public ranges only (a VPC reaches a "
                    "private endpoint)")
    return None


def capacity_block_problem(start: datetime, end: datetime) -> list[tuple[str, str]]:
    """(field, problem) of a Capacity Block's window as EC2 sells blocks: every block ends at 11:30 UTC; its
    length is the purchased duration (1-14 days, then 7-day steps up to 182), give or take the part of a
    day by which a block starting at another hour falls short of it or exceeds it."""
    limits = spec_limits().aws.capacity_block
    hour, minute = (int(p) for p in limits.end_utc.split(":"))
    utc = end.astimezone(_UTC)
    if (utc.hour, utc.minute, utc.second) != (hour, minute, 0):
        return [("end", f"{utc:%Y-%m-%dT%H:%M:%SZ} is not {limits.end_utc} UTC, when every Capacity Block ends "
                        f"({limits.source}); write the block's end as AWS shows it")]
    days = (end - start) / timedelta(days=1)
    daily, weekly = limits.daily_steps_up_to_days, limits.weekly_steps_up_to_days
    durations = [*range(1, daily + 1), *range(daily + 7, weekly + 1, 7)]
    if not any(abs(days - d) < 1 for d in durations):
        return [("end", f"the block lasts {days:g} days; Capacity Blocks are sold for 1-{daily} days, then 7-day "
                        f"steps up to {weekly} ({limits.source}); write the block's window as purchased")]
    return []


_UTC = datetime.fromisoformat("2000-01-01T00:00:00+00:00").tzinfo


def cron_problem(expression: str) -> str | None:
    """An EventBridge cron(...) expression: six fields in range; one of day-of-month and day-of-week is ?."""
    limits = spec_limits().aws.eventbridge_cron
    match = _CRON.match(expression)
    if match is None:
        return f"not a cron(...) expression ({limits.source}); write it like cron(0 4 ? * SUN *)"
    fields = match.group(1).split()
    if len(fields) != len(limits.fields):
        return (f"{len(fields)} fields; EventBridge cron takes six: minutes hours day-of-month month day-of-week year "
                f"({limits.source}); write it like cron(0 4 ? * SUN *)")
    for text, (name, low, high) in zip(fields, limits.fields, strict=True):
        problem = _cron_field_problem(text, name, low, high)
        if problem:
            return f"{problem} ({limits.source}); rewrite the {name} field"
    day_of_month, day_of_week = fields[2], fields[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        return (f"day-of-month {day_of_month} and day-of-week {day_of_week}: EventBridge takes exactly one of them, "
                f"the other must be ? ({limits.source}); write ? in the one you do not mean")
    return None


def _cron_field_problem(text: str, name: str, low: int, high: int) -> str | None:
    names = _MONTHS if name == "month" else _DAYS if name == "day-of-week" else ()
    for item in text.split(","):
        base = item
        if "/" in base:
            base, _, step = base.partition("/")
            if not step.isdigit() or int(step) == 0:
                return f"{name} {item!r}: the increment after / is not a positive number"
        if base in ("*", "?") or (base in ("L", "LW") and name in ("day-of-month", "day-of-week")):
            if base == "?" and name not in ("day-of-month", "day-of-week"):
                return f"{name} {item!r}: ? is only for day-of-month and day-of-week"
            continue
        if name == "day-of-week" and "#" in base:
            day, _, nth = base.partition("#")
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                return f"{name} {item!r}: the week after # is 1-5"
            base = day
        if name == "day-of-month" and base.endswith("W"):
            base = base[:-1]
        if name == "day-of-week" and base.endswith("L") and len(base) > 1:
            base = base[:-1]
        for part in base.split("-", 1):
            value = names.index(part.upper()) + (1 if names else 0) if part.upper() in names else None
            if value is None and not part.isdigit():
                return f"{name} {item!r} is not a value, range or wildcard"
            number = value if value is not None else int(part)
            if not low <= number <= high:
                return f"{name} {number} is outside {low}-{high}"
    return None


def datasync_schedule_problem(expression: str) -> str | None:
    """A DataSync task schedule: rate(...) or EventBridge cron(...), no more often than hourly."""
    limits = spec_limits().aws.datasync
    rate = _RATE.match(expression)
    if rate is not None:
        count, unit = int(rate.group(1)), rate.group(2)
        minutes = count * {"minute": 1, "hour": 60, "day": 1440}[unit.rstrip("s")]
        if count == 0 or (count == 1) != (not unit.endswith("s")):
            return f"rate({count} {unit}): write rate(1 hour) or rate(N hours) with N above 1 ({limits.source})"
        if minutes < limits.min_interval_minutes:
            return (f"every {minutes} minutes; DataSync runs a task at most hourly ({limits.source}); "
                    "write rate(1 hour) or longer")
        return None
    if not expression.startswith("cron("):
        return f"not a schedule expression ({limits.source}); write rate(1 hour), rate(12 hours) or cron(0 2 * * ? *)"
    problem = cron_problem(expression)
    if problem:
        return problem
    minute_field = expression.removeprefix("cron(").split()[0]
    if not minute_field.isdigit():
        return (f"minutes {minute_field!r} runs the task more than once an hour; DataSync runs a task at most hourly "
                f"({limits.source}); write one minute, e.g. cron(0 * * * ? *)")
    return None


def ssm_parameter_problem(name: str, written: bool) -> str | None:
    """A Parameter Store name: levels, empty levels, and (for one gpuforge writes) the reserved prefixes."""
    limits = spec_limits().aws.ssm_parameter
    levels = name.strip("/").split("/")
    if "" in levels or name.endswith("/"):
        return f"an empty level (// or a trailing /) in the name ({limits.source}); remove it"
    if len(levels) > limits.max_levels:
        return f"{len(levels)} levels; Parameter Store allows {limits.max_levels} ({limits.source}); flatten the path"
    if written and levels[0].lower().startswith(tuple(limits.reserved_prefixes)):
        return (f"names starting with {' or '.join(limits.reserved_prefixes)} are reserved ({limits.source}); "
                "use e.g. /gpuforge/<cluster>/...")
    return None


read_parameter_problem = partial(ssm_parameter_problem, written=False)
written_parameter_problem = partial(ssm_parameter_problem, written=True)


def smarthost_problem(value: str) -> str | None:
    port = value.rsplit(":", 1)[-1]
    return port_problem(int(port), "SMTP relay") if port.isdigit() else None
