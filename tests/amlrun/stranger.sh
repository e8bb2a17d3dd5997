# Another local user for the security tests (sourced after tests/lib.sh):
# `amldist-stranger`, a system account without a home, made once (useradd)
# and used through runuser.  The tests run as root; elsewhere they skip.
STRANGER=amldist-stranger

# stranger_setup: 0 when the user exists (made now if need be) and this
# test can act as it; $STRANGER_UID, and $STRANGER_DIR, a directory of
# TEST_TMP that the user owns.
stranger_setup() {
    [ "$(id -u)" = 0 ] && have useradd && have runuser || return 1
    # Tests beside this one may make it at the same moment: one wins.
    id -u "$STRANGER" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /bin/sh "$STRANGER" >/dev/null 2>&1 ||
        id -u "$STRANGER" >/dev/null 2>&1 || return 1
    STRANGER_UID=$(id -u "$STRANGER")
    chmod 711 "$TEST_TMP"
    STRANGER_DIR=$TEST_TMP/stranger
    mkdir -p "$STRANGER_DIR" && chown "$STRANGER" "$STRANGER_DIR"
}

# as_stranger COMMAND...: COMMAND as that user, with a plain environment.
as_stranger() {
    runuser -u "$STRANGER" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$STRANGER_DIR" "$@"
}

# A listener on 127.0.0.1:PORT (python3 -c "$LISTENER_PY" PORT FILE): it
# writes its pid to FILE.pid, "listening" to FILE once it listens and
# "connected" for each connection it accepts (and closes).
LISTENER_PY='
import os, socket, sys
open(sys.argv[2] + ".pid", "w").write("%d\n" % os.getpid())
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
f = open(sys.argv[2], "a", buffering=1)
f.write("listening\n")
while True:
    c, _ = s.accept()
    f.write("connected\n")
    c.close()
'

# stranger_listen PORT FILE: that listener as the stranger, in the
# background ($!: runuser, which ends with it); stop it with
# listener_stop FILE.
stranger_listen() {
    runuser -u "$STRANGER" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$STRANGER_DIR" \
        "$TORCH_PY" -c "$LISTENER_PY" "$1" "$2" &
}

# listener_stop FILE: end the listener of FILE (by its pid), and wait for
# what this shell started for it.
listener_stop() {
    local pid
    pid=$(cat "$1.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
    wait 2>/dev/null || true
}
