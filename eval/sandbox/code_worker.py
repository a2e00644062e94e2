"""The candidate's process: loads model-written code as a module and calls its functions on request.

Run by the judge (`eval/sandbox/code_judge.py`) as `python -I -S -c SOURCE REQUEST_FD REPLY_FD`, a fresh
interpreter that holds no test, no expected output and no verdict channel. Everything here is
untrusted once the candidate is loaded (it can replace any of it); the judge relies on none of
it except that a reply is a decodable value.
"""

import os
import struct
import sys
import types

REQ, REP = int(sys.argv[1]), int(sys.argv[2])
_MAX = 64 << 20


def _read(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(REQ, n - len(buf))
        if not chunk:
            os._exit(0)  # the judge is gone
        buf += chunk
    return buf


def recv():
    (n,) = struct.unpack(">Q", _read(8))
    if n > _MAX:
        os._exit(3)
    return codec.loads(_read(n))


def send(obj):
    try:
        data = codec.dumps(obj)
    except Exception as e:  # noqa: BLE001 - e.g. a reply too large
        data = codec.dumps({"ok": False, "error": ["CodecError", str(e)[:500]]})
    data = struct.pack(">Q", len(data)) + data
    while data:
        data = data[os.write(REP, data) :]


def describe(e):
    return [type(e).__name__, str(e)[:500]]


def _load_codec():
    (n,) = struct.unpack(">Q", _read(8))
    import json

    init = json.loads(_read(n).decode("utf-8", "surrogatepass"))
    mod = types.ModuleType("lw_codec")
    exec(compile(init["codec"], "lw_codec.py", "exec"), mod.__dict__)
    mod.allow_big_ints()
    return mod, init


codec, init = _load_codec()
sys.path.extend(init.get("paths", []))  # the allowed packages: the same rule as for the tests
candidate = types.ModuleType("candidate")
candidate.__file__ = "candidate.py"
sys.modules["candidate"] = candidate
try:
    exec(compile(init["source"], "candidate.py", "exec"), candidate.__dict__)
except BaseException as e:  # SystemExit and KeyboardInterrupt too: the candidate did not load
    send({"ready": False, "error": describe(e)})
    os._exit(0)
send({"ready": True})
_MUTABLE = (list, dict, set, bytearray)
while True:
    msg = recv()
    fn = vars(candidate).get(msg["name"])
    if not callable(fn):
        send({"ok": False, "error": ["NameError", f"the code defines no function {msg['name']!r}"]})
        continue
    try:
        args = [codec.decode(a) for a in msg["args"]]
        kwargs = {k: codec.decode(v) for k, v in msg["kwargs"].items()}
        value = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - SystemExit in the candidate is a failed call
        send({"ok": False, "error": describe(e)})
        continue
    try:
        after = [codec.encode(a) if isinstance(a, _MUTABLE) else None for a in args]
        send({"ok": True, "value": codec.encode(value), "args": after})
    except BaseException as e:  # noqa: BLE001
        send({"ok": False, "error": ["CodecError", str(e)[:500]]})
