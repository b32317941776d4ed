"""The writer of the signed result stream, for both reporters.

Copied into the grading sandbox next to them (as `patchgym_signed_stream`) and imported by them
before any code of the repository runs. One record per line:

    <payload: JSON, keys sorted, ASCII>\\t<HMAC-SHA256 over "nonce\\nseq\\npayload", hex>\\n

Everything it serialises, signs and writes with is taken when this module is imported: a C JSON
encoder (`json.encoder.c_make_encoder` over `encode_basestring_ascii`), OpenSSL's HMAC object
(`_hashlib.hmac_new`: a built-in type, its `copy`/`update`/`hexdigest` cannot be replaced) and
`os.write`. Why: once imported, the repository's code may replace `json.dumps`, `JSONEncoder`'s
methods, `hmac.HMAC.copy` or `os.write` (module attributes, methods of Python classes); a writer
that looked them up at each record would sign what they return. Measured: a package `__init__`
that replaced `json.dumps` made the stream report its failing tests as PASSED, and only the log
cross-check caught it (tests/test_integrity_round3.py has the attack). Where the C pieces are
missing (another interpreter or build), a small encoder and HMAC of this module's own, over
functions taken at import, stand in.

Standard library only, Python >= 3.6 syntax (it runs on the task's interpreter).
"""

import hashlib
import json.encoder
import os

try:
    from _hashlib import hmac_new as _C_HMAC
except ImportError:  # Python < 3.9, or no OpenSSL
    _C_HMAC = None
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_QUOTE = getattr(json.encoder, "encode_basestring_ascii", None) or json.encoder.py_encode_basestring_ascii
_SHA256 = hashlib.sha256
_WRITE = os.write
_CLOSE = os.close
_JOIN = "".join
_LINE = "{}\t{}\n".format
_SIGNED = "{}\n{}\n{}".format
_INT_REPR = int.__repr__
_FLOAT_REPR = float.__repr__
_SORTED = sorted
_ISINSTANCE = isinstance


def _no_default(value):
    raise TypeError("the result stream cannot encode a {}".format(type(value).__name__))


def _py_encode(value):
    """JSON of the values records hold (what json.dumps(sort_keys=True, ensure_ascii=True) gives)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _ISINSTANCE(value, str):
        return _QUOTE(value)
    if _ISINSTANCE(value, int):
        return _INT_REPR(value)
    if _ISINSTANCE(value, float):
        return _FLOAT_REPR(value)
    if _ISINSTANCE(value, (list, tuple)):
        return "[" + ", ".join([_py_encode(item) for item in value]) + "]"
    if _ISINSTANCE(value, dict):
        return "{" + ", ".join([_QUOTE(key) + ": " + _py_encode(value[key]) for key in _SORTED(value)]) + "}"
    return _no_default(value)


def _make_encode():
    sample, expected = {"b": [1, None, True], "a": "caf\xe9 \"x\""}, '{"a": "caf\\u00e9 \\"x\\"", "b": [1, null, true]}'
    if _C_ENCODER is not None:
        try:
            encoder = _C_ENCODER(None, _no_default, _QUOTE, None, ": ", ", ", True, False, True)
            if _JOIN(encoder(sample, 0)) == expected:
                return lambda record: _JOIN(encoder(record, 0))
        except Exception:  # noqa: BLE001  another signature on another interpreter: ours then
            pass
    return _py_encode


_ENCODE = _make_encode()


class _Hmac(object):
    """HMAC-SHA256 over hashlib's built-in hash objects (RFC 2104), where OpenSSL's HMAC is absent."""

    def __init__(self, key=None, inner=None, outer=None):
        if key is not None:
            if len(key) > 64:
                key = _SHA256(key).digest()
            key = key + b"\x00" * (64 - len(key))
            inner, outer = _SHA256(bytes(b ^ 0x36 for b in key)), _SHA256(bytes(b ^ 0x5C for b in key))
        self._inner, self._outer = inner, outer

    def copy(self):
        return _Hmac(inner=self._inner.copy(), outer=self._outer.copy())

    def update(self, data):
        self._inner.update(data)

    def hexdigest(self):
        outer = self._outer.copy()
        outer.update(self._inner.digest())
        return outer.hexdigest()


def _new_mac(key):
    if _C_HMAC is not None:
        try:
            return _C_HMAC(key, digestmod="sha256")
        except Exception:  # noqa: BLE001  a build whose OpenSSL refuses it
            pass
    return _Hmac(key)


class SignedStream(object):
    """Appends signed records to the results file open at `fd`. Keeps only the keyed HMAC state,
    never the key; `disown()` (a forked child) stops writing."""

    def __init__(self, key, nonce, fd):
        self._mac = _new_mac(key)
        self._nonce = nonce
        self._fd = fd
        self._seq = 0

    def emit(self, kind, fields):
        record = {}
        record.update(fields)
        record["seq"] = self._seq
        record["kind"] = kind
        payload = _ENCODE(record)
        mac = self._mac.copy()
        mac.update(_SIGNED(self._nonce, self._seq, payload).encode())
        self._seq += 1
        if self._fd is None:
            return
        try:
            _WRITE(self._fd, _LINE(payload, mac.hexdigest()).encode())
        except OSError:
            pass

    def disown(self):
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                _CLOSE(fd)
            except OSError:
                pass
