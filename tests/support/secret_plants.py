"""Fake secrets of every kind redaction must catch, built at run time (no key-shaped literal
in the source), and the places a step test plants them."""

from __future__ import annotations

import base64
import json
import random
import string

ALNUM = string.ascii_letters + string.digits


def fake_secrets(seed: int = 11) -> dict[str, str]:
    """kind → a fake secret shaped like the real thing."""
    rng = random.Random(seed)

    def rand(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    pem_body = "\n".join(base64.b64encode(bytes(rng.randrange(256) for _ in range(48))).decode() for _ in range(5))
    kind_word = "RSA " + "PRIVATE" + " KEY"
    pem = f"-----BEGIN {kind_word}-----\n{pem_body}\n-----END {kind_word}-----"
    jwt_parts = ('{"alg":"HS256","typ":"JWT"}', '{"sub":"' + rand(10) + '","iat":1700000000}')
    jwt = ".".join(base64.urlsafe_b64encode(p.encode()).decode().rstrip("=") for p in jwt_parts)
    digits = string.digits
    return {
        "openai": "sk-" + "proj-" + rand(48, ALNUM + "_-"),
        "anthropic": "sk-" + "ant-" + "api03-" + rand(90, ALNUM + "_-") + "AA",
        "aws-key-id": "AK" + "IA" + rand(16, string.ascii_uppercase + "234567"),
        "aws-secret": rand(40, ALNUM + "/+"),
        "github": "gh" + "p_" + rand(36),
        "slack": "xo" + "xb-" + rand(12, digits) + "-" + rand(13, digits) + "-" + rand(24),
        "pem-private-key": pem,
        "jwt": jwt + "." + rand(43, ALNUM + "-_"),
        "url-password": rand(20),
        "gcp-service-account": json.dumps({
            "type": "service_" + "account", "project_id": "demo", "private_key_id": rand(40, "0123456789abcdef"),
            "private_key": pem.replace(pem_body[:20], rand(20, ALNUM)) + "\n",
            "client_email": "bot@demo.iam.example"}),
        "high-entropy": rand(44, ALNUM + "+/"),
        # a provider key of no known shape, in a variable whose name has no secret word
        "provider-key": "acme-" + rand(6, string.ascii_lowercase) + "-" + rand(6, string.ascii_lowercase),
    }


def as_text(kind: str, value: str) -> str:
    """How the secret shows up in ordinary text (a URL password inside its URL)."""
    if kind == "url-password":
        return f"postgres://app:{value}@db.internal:5432/app"
    return value


def needles(kind: str, value: str) -> list[str]:
    """The fragments that must never appear: the secret, and each line of a multi-line one
    (also as JSON-escaped text)."""
    if kind == "gcp-service-account":
        data = json.loads(value)
        parts = [data["private_key_id"]] + needles("pem-private-key", data["private_key"].strip())
    elif kind == "pem-private-key":
        parts = [line for line in value.splitlines() if "-----" not in line]
    else:
        parts = [value]
    return parts
