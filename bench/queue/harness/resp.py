"""Just enough of Redis's protocol (RESP2) for the orchestrator: commands, MONITOR lines."""

import socket


def encode(args):
    """One command as RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class ReplyError(Exception):
    pass


class Connection:
    def __init__(self, port, host="127.0.0.1", timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    @property
    def local_address(self):
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def command(self, *args):
        self.sock.sendall(encode(args))
        return self.reply()

    def reply(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("redis-server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise ReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError(f"not a RESP reply: {line[:80]!r}")

    def close(self):
        self.file.close()
        self.sock.close()


def parse_monitor_line(line):
    """'1700000000.1 [0 127.0.0.1:5000] "SET" "k\\x00" "v"' -> ('127.0.0.1:5000', [b'SET', ...]).

    The client is 'lua' for commands a script ran. Arguments are quoted with C-like escapes.
    """
    head, _, rest = line.partition("] ")
    client = head.rpartition(" ")[2]
    args, i, n = [], 0, len(rest)
    while i < n:
        if rest[i] != '"':
            i += 1
            continue
        i += 1
        buf = bytearray()
        while rest[i] != '"':
            c = rest[i]
            if c == "\\":
                e = rest[i + 1]
                if e == "x":
                    buf.append(int(rest[i + 2:i + 4], 16))
                    i += 4
                    continue
                buf += {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b"}.get(
                    e, e.encode())
                i += 2
                continue
            buf += c.encode()
            i += 1
        args.append(bytes(buf))
        i += 1
    return client, args
