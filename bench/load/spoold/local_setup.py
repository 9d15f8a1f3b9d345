"""What the spoold measurement scripts of this folder set up alike: a self-signed certificate for
127.0.0.1, and the descriptor limit raised to its hard value."""

import os
import resource
import subprocess


def make_cert(directory):
    """A P-256 certificate and key for 127.0.0.1 in DIRECTORY; returns their paths."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def raise_nofile_limit():
    """Lets this process open as many descriptors as its hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
