"""The writer of the signed result stream, for both reporters.

Copied into the grading sandbox next to them (as `patchgym_signed_stream`) and imported by them
before any code of the repository runs. One record per line:

    <payload: JSON, keys sorted, ASCII>\\t<HMAC-SHA256 over "nonce\\nseq\\npayload", hex>\\n

Everything it serialises, signs and writes with is taken when this module is imported: a C JSON
encoder (`json.encoder.c_make_encoder` over `encode_basestring_ascii`), the interpreter's built-in
SHA-256 type (`_sha2.sha256`, `_sha256.sha256` before 3.12: a built-in type, its
`copy`/`update`/`digest` cannot be replaced), over which HMAC (RFC 2104) is computed with no class
of this module's in between, and `os.write`. Why: once imported, the repository's code may replace
`json.dumps`, `JSONEncoder`'s methods, `hmac.HMAC.copy` or `os.write` (module attributes, methods
of Python classes); a writer that looked them up at each record would sign what they return.
Measured: a package `__init__` that replaced `json.dumps` made the stream report its failing tests
as PASSED, and only the log cross-check caught it (tests/test_integrity_round3.py has the attack).
Why not OpenSSL's HMAC (`_hashlib.hmac_new`, also a built-in type): importing `_hashlib` loads
OpenSSL, ~3.5 ms of every grading whose repository never imports hashlib. Where the C encoder is
missing (another interpreter or build), a small encoder of this module's own, over functions taken
at import, stands in; where no built-in SHA-256 module exists, hashlib's.

Standard library only, Python >= 3.6 syntax (it runs on the task's interpreter).
"""

import json.encoder
import os


def _builtin_sha256():
    for name in ("_sha2", "_sha256"):
        try:
            return getattr(__import__(name), "sha256")
        except (ImportError, AttributeError):
            continue
    import hashlib
    return hashlib.sha256


_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_QUOTE = getattr(json.encoder, "encode_basestring_ascii", None) or json.encoder.py_encode_basestring_ascii
_SHA256 = _builtin_sha256()
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


def _keyed(key):
    """The two keyed SHA-256 states of HMAC (RFC 2104): inner and outer."""
    if len(key) > 64:
        key = _SHA256(key).digest()
    key = key + b"\x00" * (64 - len(key))
    return _SHA256(bytes(b ^ 0x36 for b in key)), _SHA256(bytes(b ^ 0x5C for b in key))


class SignedStream(object):
    """Appends signed records to the results file open at `fd`. Keeps only the keyed HMAC states,
    never the key; `disown()` (a forked child) stops writing."""

    def __init__(self, key, nonce, fd):
        self._inner, self._outer = _keyed(key)
        self._nonce = nonce
        self._fd = fd
        self._seq = 0

    def emit(self, kind, fields, _encode=_ENCODE, _signed=_SIGNED, _line=_LINE, _write=_WRITE):
        # What it encodes and writes with is bound as defaults when the class is made, not looked up
        # in this module's globals at each record: those are a dict the repository's code can write
        # (`_ENCODE` replaced there had turned integrity records into harmless ones).
        record = {}
        record.update(fields)
        record["seq"] = self._seq
        record["kind"] = kind
        payload = _encode(record)
        inner = self._inner.copy()
        inner.update(_signed(self._nonce, self._seq, payload).encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        self._seq += 1
        if self._fd is None:
            return
        try:
            _write(self._fd, _line(payload, outer.hexdigest()).encode())
        except OSError:
            pass

    def disown(self):
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                _CLOSE(fd)
            except OSError:
                pass
