# airlock's wasm level: Python starts in the sandbox's working directory. WASI has no working
# directory of its own (wasi-libc starts every program in "/"), so the driver passes it as PWD and
# this module, which site imports at startup, changes to it.
import os as _os

_d = _os.environ.get("PWD")
if _d:
    try:
        _os.chdir(_d)
    except OSError:
        pass
del _os, _d
