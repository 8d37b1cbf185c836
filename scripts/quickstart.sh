#!/bin/sh
# The main job on a fresh machine (make run): airlock serve with embedded defaults — SQLite in a
# local data dir, loopback only — a first API key, and a copy-paste example. Ctrl-C stops the
# daemon (it then terminates its sandboxes).
set -eu
BIN=${AIRLOCK_BIN:-bin/airlock}
DATA=${AIRLOCK_DATA_DIR:-$PWD/.airlock}
LISTEN=${AIRLOCK_LISTEN:-127.0.0.1:7070}

KEY=$("$BIN" keys create --tenant default --data-dir "$DATA")
ADMIN=$("$BIN" keys create --admin --data-dir "$DATA" 2>/dev/null)
cat <<MSG

airlock serve is starting on http://$LISTEN (data in $DATA).
A new API key for tenant "default" (shown once):

    $KEY

and an admin key, the operator's (images, pools, every tenant's quota; keep it to yourself):

    $ADMIN

Open the web console in a browser, signed in with the first key (it is in the address's
fragment, which the browser never sends; the page keeps it in that tab only):

    http://$LISTEN/ui/#key=$KEY

In another terminal, copy and paste:

    export AIRLOCK_HOST=http://$LISTEN AIRLOCK_TOKEN=$KEY
    ID=\$($BIN create --memory 512M --timeout 10m)    # gVisor's container, the default level
    $BIN exec \$ID -- python3 -c 'print("hello from sandbox", __import__("os").getuid())'
    $BIN exec -it \$ID            # an interactive shell in the same sandbox
    $BIN ls
    $BIN rm \$ID
    $BIN tenants                  # this key's quota and what it uses
    $BIN console --open           # the web console, signed in with this key
    AIRLOCK_TOKEN=$ADMIN $BIN pool put warm --size 2 --memory 512M   # an operator's warm pool

Python and JavaScript as WebAssembly inside airlock (the wasm level, milliseconds per command):

    W=\$($BIN create --isolation wasm)
    $BIN exec \$W -- python3 -c 'print(sum(range(10)))'
    $BIN exec \$W -- node -e 'console.log([1, 2, 3].map(x => x * 2))'

or with curl:

    curl -s -H "Authorization: Bearer $KEY" -d '{"resources":{"memoryMb":512}}' http://$LISTEN/api/v1/sandboxes
    curl -s -H "Authorization: Bearer $KEY" -d '{"command":"echo hi; uname -a"}' http://$LISTEN/api/v1/sandboxes/SBX_ID/exec

MSG
exec "$BIN" serve --data-dir "$DATA" --listen "$LISTEN"
