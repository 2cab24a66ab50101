"""Managed Redis as users run it: redis-server on a TLS port only, its certificates made here
with ``openssl`` (a CA, the server's for 127.0.0.1 and localhost, a client's), a password for
the default user and an ACL user limited to the commands slicecount sends."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import redis

from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.errors import StartupError

APP_USER = "slicecount"
APP_COMMANDS = (
    # connecting (AUTH is open to every user; redis-py's CLIENT SETINFO, refused, is ignored)
    "+ping +select "
    # transactions and scripts (EVALSHA; SCRIPT LOAD when a server lacks a script)
    "+multi +exec +discard +watch +unwatch +evalsha +script|load "
    # counters, registries, annotations, writer sequences, leases
    "+get +set +del +incrby +decrby +expireat +pexpire +type +time "
    "+hincrby +hset +hget +hmget +hgetall +hdel +hexists +hkeys +hlen "
    # the blocks layout: its blocks read in ranges, moved whole when resharding
    "+getrange +exists "
    "+zadd +zrem +zscore +zrange +zrangebyscore +zrangebylex +zremrangebyscore +zscan "
    # exemplars: a minute's replaced, the bound, the retention
    "+zremrangebylex +zremrangebyrank "
    # unique counts
    "+sadd +scard +smembers +pfadd +pfcount +pfmerge"
)
"""The allow-list the README gives for a restricted ACL user on one server or behind Sentinel
(``-@all`` first: nothing else, no @dangerous command, no KEYS, no FLUSHALL, no CONFIG)."""


def password() -> str:
    """A password no test output could contain by chance."""
    return f"TopSecretPw-{secrets.token_hex(8)}"


@dataclass(frozen=True)
class Certificates:
    """PEM files: a CA, the server's certificate and key, a client's certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A throw-away CA and the certificates it signs (EC keys: made in milliseconds)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise StartupError("openssl is not on PATH: the TLS tests need it to make certificates")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=slicecount test CA")  # fmt: skip
    for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        (directory / f"{name}.ext").write_text(
            f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n"
        )
        run("req", "-new", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
            "-extfile", f"{name}.ext")  # fmt: skip
    return Certificates(
        directory / "ca.crt",
        directory / "server.crt",
        directory / "server.key",
        directory / "client.crt",
        directory / "client.key",
    )


class TlsRedis:
    """redis-server listening on a TLS port only (``--port 0``), with ``--requirepass`` and,
    once started, the restricted ACL user ``APP_USER``."""

    def __init__(self, certs: Certificates, *, client_certificates: bool) -> None:
        self.certs = certs
        self.admin_password = password()
        self.app_password = password()
        self.tls_port = free_port()
        self.client_certificates = client_certificates
        verify = "yes" if client_certificates else "no"
        args = [
            "--port", "0", "--tls-port", str(self.tls_port), "--tls-auth-clients", verify,
            "--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key),
            "--tls-ca-cert-file", str(certs.ca), "--requirepass", self.admin_password,
        ]  # fmt: skip
        self.server = EmbeddedRedis(args=args)

    def start(self) -> TlsRedis:
        self.server.start()
        with self.admin() as client:
            client.execute_command(
                "ACL", "SETUSER", APP_USER, "reset", "on", f">{self.app_password}", "~*",
                "resetchannels", "-@all", *APP_COMMANDS.split(),
            )  # fmt: skip
        return self

    def url(self, user: str = "", secret: str | None = None, db: int = 0) -> str:
        """A ``rediss://`` URL with the CA (and the client's certificate when the server
        asks for one); ``secret`` defaults to the user's own password."""
        if secret is None:
            secret = self.app_password if user == APP_USER else self.admin_password
        options = f"ssl_ca_certs={self.certs.ca}"
        if self.client_certificates:
            options += f"&ssl_certfile={self.certs.client_cert}"
            options += f"&ssl_keyfile={self.certs.client_key}"
        return f"rediss://{user}:{secret}@127.0.0.1:{self.tls_port}/{db}?{options}"

    def admin(self) -> redis.Redis:
        """A client of the default (unrestricted) user, for set-up and checks."""
        return redis.Redis.from_url(self.url(), decode_responses=True)

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> TlsRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
