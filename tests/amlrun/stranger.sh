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

# stranger_listen PORT FILE: that user's process listening on
# 127.0.0.1:PORT in the background (its pid in $!), writing "listening"
# to FILE once it does and "connected" for each connection it accepts.
stranger_listen() {
    as_stranger "$TORCH_PY" -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
f = open(sys.argv[2], "a", buffering=1)
f.write("listening\n")
while True:
    c, _ = s.accept()
    f.write("connected\n")
    c.close()
' "$1" "$2" &
}
