"""Argument value generators for the synthetic corpus.

A *slot* is one kind of argument (an order id, a hostname, an amount, a list of
hosts, an address object...). It knows the JSON Schema a tool declares for it and
how to draw a value together with the words a user would type for it. Most values
are copied verbatim from the user's words (``copied=True``); a few are converted
(``"$25.50"`` → ``25.5``, "force it" → ``true``).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_FIRST = [
    "jane",
    "alice",
    "bob",
    "maria",
    "chen",
    "omar",
    "lena",
    "raj",
    "sofia",
    "tom",
    "yuki",
    "ivan",
    "nora",
    "paul",
    "ines",
    "kofi",
    "ana",
    "liam",
    "emma",
    "noah",
    "zoe",
    "li",
    "amir",
    "dana",
    "eli",
    "hana",
    "joao",
    "karl",
    "mia",
    "nils",
    "olga",
    "pia",
    "rosa",
    "sam",
    "tara",
]
_LAST = [
    "doe",
    "smith",
    "nguyen",
    "garcia",
    "khan",
    "mueller",
    "rossi",
    "silva",
    "tanaka",
    "ivanova",
    "brown",
    "lee",
    "martin",
    "okafor",
    "novak",
    "berg",
    "costa",
    "dubois",
    "fischer",
    "haas",
    "jensen",
    "kowalski",
    "lopez",
    "moreau",
    "park",
]
_DOMAINS = [
    "example.com",
    "mail.com",
    "acme.io",
    "shop.net",
    "corp.org",
    "inbox.dev",
    "fastmail.fm",
    "example.org",
    "contoso.com",
    "globex.net",
    "initech.io",
    "umbrella.co",
]
_HOST_ROLES = [
    "web",
    "db",
    "api",
    "cache",
    "app",
    "worker",
    "mq",
    "search",
    "auth",
    "lb",
    "proxy",
    "build",
    "mail",
    "gw",
    "edge",
    "node",
]
_HOST_ENVS = ("", "prod", "stg", "dev", "eu", "us", "int", "qa")
_SERVICES = [
    "nginx",
    "postgres",
    "redis",
    "mysql",
    "sshd",
    "docker",
    "kubelet",
    "haproxy",
    "rabbitmq",
    "kafka",
    "elasticsearch",
    "billing-worker",
    "payments-api",
    "cron",
    "memcached",
    "grafana",
    "prometheus",
    "etcd",
    "consul",
    "vault",
    "celery",
    "gunicorn",
    "node-exporter",
    "mongod",
]
_REASONS = [
    "arrived damaged",
    "wrong size",
    "never arrived",
    "charged twice",
    "item not as described",
    "changed my mind",
    "late delivery",
    "missing parts",
    "defective",
    "duplicate order",
    "wrong color",
    "package was empty",
    "better price elsewhere",
    "ordered by mistake",
    "broken on arrival",
]
_TITLES = [
    "Disk full on {h}",
    "High latency in checkout",
    "Login page returns 500",
    "Backup job failed",
    "Certificate expires soon",
    "Memory leak in {s}",
    "Customer cannot reset password",
    "Refund not received",
    "Slow queries on {h}",
    "Deploy of {s} stuck",
    "VPN drops every hour",
    "Printer on floor 3 offline",
    "Invoice shows wrong VAT",
    "Email bounces from {h}",
    "Cron job {s} not running",
    "Page load over 4s",
    "Mobile app crashes on start",
]
_CITIES = [
    "Springfield",
    "Berlin",
    "Lisbon",
    "Austin",
    "Osaka",
    "Toronto",
    "Lyon",
    "Dublin",
    "Denver",
    "Madrid",
    "Oslo",
    "Porto",
    "Seattle",
    "Boston",
    "Leeds",
    "Graz",
    "Turin",
    "Utrecht",
]
_STREETS = [
    "Main St",
    "Oak Ave",
    "Elm Street",
    "Market Rd",
    "High St",
    "Pine Lane",
    "Baker St",
    "Cedar Ave",
    "Mill Road",
]
_TOPICS = [
    "password reset",
    "refund policy",
    "vpn setup",
    "api rate limits",
    "two factor auth",
    "shipping times",
    "kubernetes upgrade",
    "backup restore",
    "sso login",
    "invoice download",
    "log retention",
    "disk cleanup",
]
_NOTES = [
    "server maintenance tonight",
    "the build is green again",
    "lunch at noon",
    "please review the PR",
    "standup moved to 10:30",
    "invoice paid",
    "call the vendor",
    "rotate the api keys",
    "new hire starts Monday",
]


@dataclass(frozen=True)
class Drawn:
    """One drawn value: what the user types and what the arguments hold."""

    surface: str
    value: Any
    copied: bool


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(1, 9)) + "".join(rng.choice(string.digits) for _ in range(n - 1))


def _name_pair(rng: random.Random) -> tuple[str, str]:
    return rng.choice(_FIRST), rng.choice(_LAST)


def hostname(rng: random.Random) -> str:
    role = rng.choice(_HOST_ROLES)
    env = rng.choice(_HOST_ENVS)
    num = rng.choice(("", str(rng.randint(1, 9)), f"{rng.randint(1, 30):02d}"))
    sep = rng.choice("--" if num else "-")
    parts = [role] + ([env] if env else [])
    name = "-".join(parts) + (sep + num if num and rng.random() < 0.7 else num)
    if rng.random() < 0.15:
        name += rng.choice((".internal", ".example.net", ".corp.local", ".lan"))
    return name


def _plain(value: str) -> Drawn:
    return Drawn(value, value, True)


def order_id(rng: random.Random) -> Drawn:
    style = rng.random()
    if style < 0.5:
        return _plain(_digits(rng, rng.randint(4, 6)))
    if style < 0.8:
        return _plain(rng.choice(("ORD-", "A", "#", "SO-", "ord_")) + _digits(rng, 5))
    letters = "".join(rng.choice(string.ascii_uppercase) for _ in range(2))
    return _plain(letters + _digits(rng, 4))


def customer_id(rng: random.Random) -> Drawn:
    return _plain(rng.choice(("C-", "CUST-", "cus_", "c", "")) + _digits(rng, rng.randint(3, 6)))


def email(rng: random.Random) -> Drawn:
    first, last = _name_pair(rng)
    sep = rng.choice((".", "_", "", "."))
    local = rng.choice(
        (f"{first}{sep}{last}", first + str(rng.randint(1, 99)), f"{first[0]}{last}")
    )
    if rng.random() < 0.15:
        local = local.capitalize()
    return _plain(f"{local}@{rng.choice(_DOMAINS)}")


def amount(rng: random.Random) -> Drawn:
    if rng.random() < 0.5:
        value: int | float = rng.randint(5, 500)
        text = str(value)
    else:
        cents = rng.randint(1, 99)
        value = round(rng.randint(1, 400) + cents / 100, 2)
        text = f"{value:.2f}"
    surface = rng.choice(("${}", "{}", "{} USD", "{} dollars", "€{}", "{} EUR")).format(text)
    return Drawn(surface, value, surface == str(value))


def integer(lo: int, hi: int, unit: str = "") -> Callable[[random.Random], Drawn]:
    def draw(rng: random.Random) -> Drawn:
        value = rng.randint(lo, hi)
        return Drawn(f"{value}{unit}", value, not unit)

    return draw


def pick(pool: tuple[str, ...] | list[str]) -> Callable[[random.Random], Drawn]:
    def draw(rng: random.Random) -> Drawn:
        return _plain(rng.choice(pool))

    return draw


def host(rng: random.Random) -> Drawn:
    return _plain(hostname(rng))


def service(rng: random.Random) -> Drawn:
    return _plain(rng.choice(_SERVICES))


def reason(rng: random.Random) -> Drawn:
    return _plain(rng.choice(_REASONS))


def title(rng: random.Random) -> Drawn:
    text = rng.choice(_TITLES).format(h=hostname(rng), s=rng.choice(_SERVICES))
    return _plain(text)


def username(rng: random.Random) -> Drawn:
    first, last = _name_pair(rng)
    return _plain(rng.choice((f"{first[0]}{last}", f"{first}.{last}", first, f"{first}_{last[0]}")))


def version(rng: random.Random) -> Drawn:
    text = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"
    return _plain(rng.choice(("v", "", "")) + text)


def tracking(rng: random.Random) -> Drawn:
    prefix = rng.choice(("1Z", "TRK", "JD", "LX"))
    return _plain(prefix + "".join(rng.choice(string.digits + "ABCDEF") for _ in range(8)))


def invoice_id(rng: random.Random) -> Drawn:
    return _plain(f"INV-{rng.randint(2021, 2026)}-{rng.randint(1, 9999):04d}")


def date(rng: random.Random) -> Drawn:
    return _plain(f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")


def city(rng: random.Random) -> Drawn:
    return _plain(rng.choice(_CITIES))


def topic(rng: random.Random) -> Drawn:
    return _plain(rng.choice(_TOPICS))


def note(rng: random.Random) -> Drawn:
    return _plain(rng.choice(_NOTES))


def path(rng: random.Random) -> Drawn:
    return _plain(
        rng.choice(("/var/log", "/data", "/home", "/tmp", "/var/lib/docker", "/opt/app", "/srv"))
    )


def flag(rng: random.Random) -> Drawn:
    """A boolean; the phrase for it comes from the concept's optional fragment."""
    return Drawn("", rng.random() < 0.8, False)


def host_list(rng: random.Random) -> Drawn:
    hosts: list[str] = []
    while len(hosts) < rng.randint(2, 3):
        h = hostname(rng)
        if h not in hosts:
            hosts.append(h)
    joined = ", ".join(hosts[:-1]) + rng.choice((" and ", ", ", " & ")) + hosts[-1]
    return Drawn(joined, hosts, False)


def address(rng: random.Random) -> Drawn:
    street = f"{rng.randint(1, 250)} {rng.choice(_STREETS)}"
    town = rng.choice(_CITIES)
    zip_code = _digits(rng, 5)
    surface = f"{street}, {town} {zip_code}"
    return Drawn(surface, {"street": street, "city": town, "zip": zip_code}, False)


def address_schema(rng: random.Random) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string"},
            "zip": {"type": "string"},
        },
        "required": ["street", "city", "zip"],
    }


def string_schema(rng: random.Random) -> dict[str, Any]:
    return {"type": "string"}
