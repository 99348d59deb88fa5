# SPDX-License-Identifier: Apache-2.0
"""Encodings of a credential that brokerd's reflection filter must recognise
(brokerd/reflect.h), for the fakes' reflection directives and the tests that check them.
python3 stdlib only; written apart from the filter's C code.

    encode(key, form) -> str        FORMS lists the names

Mixes are deterministic (they alternate), so a failing form can be reproduced.
"""
import base64
import urllib.parse


def _alternate_case(s):
    return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(s))


def _pct(key, every=True, upper=True, mix=False):
    out = []
    for i, ch in enumerate(key):
        b = ord(ch)
        if mix:
            enc = ch == "%" or i % 3 != 1  # two of three bytes escaped, the rest plain
            h = f"{b:02x}" if i % 2 else f"{b:02X}"
        else:
            enc = every or ch not in "-._~" and not ch.isalnum()
            h = f"{b:02X}" if upper else f"{b:02x}"
        out.append("%" + h if enc else ch)
    return "".join(out)


def _json_u(key, upper=False, mix=False):
    out = []
    for i, ch in enumerate(key):
        if mix and ch == "/":
            out.append("\\/")
        elif mix and i % 2 and ch not in '\\"':
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04X}" if upper else f"\\u{ord(ch):04x}")
    return "".join(out)


def _b64(data, url=False, pad=True):
    s = (base64.urlsafe_b64encode if url else base64.b64encode)(data).decode()
    return s if pad else s.rstrip("=")


def _lines(s, width, sep):
    return sep.join(s[i:i + width] for i in range(0, len(s), width))


def _hex_mixed(key):
    return _alternate_case(key.encode().hex())


# Each form: a function of the key's bytes as str. The "-1"/"-2" base64 forms encode the
# key after one or two other bytes, so it starts at that byte of a 3-byte group; "-mime"
# and "-lines" wrap a longer text around the key at 76 columns, as MIME (CRLF) and
# coreutils base64 (LF) do.
FORMS = {
    "raw": lambda k: k,
    "url": lambda k: urllib.parse.quote(k, safe=""),
    "url-lower": lambda k: _pct(k, every=False, upper=False),
    "url-all": lambda k: _pct(k, every=True, upper=True),
    "url-mix": lambda k: _pct(k, mix=True),
    "hex": lambda k: k.encode().hex(),
    "hex-upper": lambda k: k.encode().hex().upper(),
    "hex-mix": _hex_mixed,
    "hex-spaced": lambda k: " ".join(f"{b:02x}" for b in k.encode()),
    "hex-lines": lambda k: _lines(k.encode().hex(), 60, "\n"),
    "base64": lambda k: _b64(k.encode()),
    "base64-nopad": lambda k: _b64(k.encode(), pad=False),
    "base64-1": lambda k: _b64(b"x" + k.encode()),
    "base64-2": lambda k: _b64(b"xy" + k.encode(), pad=False),
    "base64url": lambda k: _b64(k.encode(), url=True, pad=False),
    "base64url-1": lambda k: _b64(b"?" + k.encode(), url=True),
    "base64url-2": lambda k: _b64(b"?>" + k.encode(), url=True, pad=False),
    "base64-mime": lambda k: _lines(_b64(b"Authorization: Bearer " + k.encode() + b"\r\n" * 20), 76, "\r\n"),
    "base64-lines": lambda k: _lines(_b64(b"token=" + k.encode() + b"\n" + b"-" * 80), 76, "\n"),
    "json-u": lambda k: _json_u(k),
    "json-u-upper": lambda k: _json_u(k, upper=True),
    "json-mix": lambda k: _json_u(k, mix=True),
}


# A credential nobody holds: the same forms of it must pass the filter (a control that the
# refusal came from the key, not from the shape of the text).
DECOY = "sk-decoy-5f0c2a9e7b3d4c1a8e6f0b2d9c7a5e3f1b8d6c4a"


def encode(key, form):
    """key in the named form (KeyError for an unknown name)."""
    return FORMS[form](key)
