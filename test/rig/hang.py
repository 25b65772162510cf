#!/usr/bin/python3
"""hang.py PORTFILE [--no-read] -- a TCP listener that never answers.

Binds 127.0.0.1 on a port the kernel picks, writes that port to PORTFILE
once it is listening, then accepts every connection and keeps it open
without ever sending a byte.  By default it reads and discards what clients
send (so their writes never block and only their reads hang); --no-read
leaves the data unread so a client's send buffer fills up too.  Used for
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
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(512)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
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
