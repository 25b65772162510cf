#!/usr/bin/python3
"""hang.py PORTFILE [--no-read] [--unix PATH] -- a listener that never answers.

Binds 127.0.0.1 on a port the kernel picks, writes that port to PORTFILE
once it is listening, then accepts every connection and keeps it open
without ever sending a byte.  By default it reads and discards what clients
send (so their writes never block and only their reads hang); --no-read
leaves the data unread so a client's send buffer fills up too.  With --unix
PATH it listens on that Unix socket instead (mode 0777) and writes PATH to
PORTFILE (the rig's Unix-socket pass).  Used for
cancel and timeout tests: the port is handed to tests as MCFDW_HANG_PORT and
mcfdw_test.hang_port.  Runs until killed.
"""
import os
import selectors
import socket
import sys


def main():
    port_file = sys.argv[1]
    read = "--no-read" not in sys.argv[2:]
    path = sys.argv[sys.argv.index("--unix") + 1] if "--unix" in sys.argv[2:] else None
    if path:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        os.chmod(path, 0o777)
        where = path
    else:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        where = ls.getsockname()[1]
    ls.listen(512)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%s\n" % where)
    os.rename(tmp, port_file)   # readers never see a half-written file

    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    held = []
    while True:
        for key, _ in sel.select():
            if key.fileobj is ls:
                conn, _ = ls.accept()
                conn.setblocking(False)
                if read:
                    sel.register(conn, selectors.EVENT_READ)
                else:
                    held.append(conn)
                continue
            conn = key.fileobj
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            if not data:                # client went away
                sel.unregister(conn)
                conn.close()


if __name__ == "__main__":
    main()
