"""An S3 endpoint as storbench reaches it itself: the credentials (AWS's own places for
them), and the few requests it makes around fio's (the bucket is there, the run's
marker, listing and deleting the run's keys). fio's http engine does the I/O that is
measured; this does only the housekeeping, signed with AWS Signature Version 4 over
Python's own HTTP client (no SDK: a request or two per test).

Secrets: the secret key is a ``Secret`` (result/hidden.py): its repr and str hide it,
and whatever is stored of a run has every secret this process holds replaced (fio
echoes its options, the key among them, in its JSON).
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import hashlib
import hmac
import http.client
import json
import os
import re
import socket
import subprocess
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from storbench.errors import ConfigError, TargetError
from storbench.result.hidden import Secret, keep_secret

TIMEOUT_S = 30.0  # one housekeeping request
@dataclass(frozen=True)
class Credentials:
    key_id: str
    secret: Secret = field(repr=False)
    source: str  # where they were found, for messages: "AWS_ACCESS_KEY_ID", "profile x"


@dataclass(frozen=True)
class Endpoint:
    """An S3 endpoint: its URL (scheme, host, port) and region, and the credentials."""

    url: str  # http://127.0.0.1:9000 (path-style requests: /BUCKET/KEY)
    region: str
    credentials: Credentials | None  # None: anonymous requests

    @property
    def https(self) -> bool:
        return self.url.startswith("https://")

    @property
    def host(self) -> str:
        """host[:port] as fio's http_host and the Host header give it."""
        return urllib.parse.urlsplit(self.url).netloc

    # -- requests --------------------------------------------------------------------

    def request(self, method: str, path: str, query: dict[str, str] | None = None,
                body: bytes = b"", extra: dict[str, str] | None = None) -> tuple[int, bytes]:
        """(status, body) of one signed request; TargetError when it cannot be made."""
        connection = self.connect()
        try:
            response = self.send(connection, method, path, query, body, extra)
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise TargetError(f"S3 endpoint {self.url}: {method} {path}: {exc}") from None
        finally:
            connection.close()

    def connect(self) -> http.client.HTTPConnection:
        """A connection to the endpoint (made as the first request is sent on it)."""
        return (http.client.HTTPSConnection(self.host, timeout=TIMEOUT_S) if self.https
                else http.client.HTTPConnection(self.host, timeout=TIMEOUT_S))

    def send(self, connection: http.client.HTTPConnection, method: str, path: str,
             query: dict[str, str] | None = None, body: bytes = b"",
             extra: dict[str, str] | None = None) -> http.client.HTTPResponse:
        """One signed request on ``connection``; its response, headers read (the body is
        the caller's to read, before the next request on it)."""
        query = query or {}
        canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        headers = self._signed(method, path, canonical_query, body, extra or {})
        target = _quote(path, safe="/~") + (f"?{canonical_query}" if canonical_query else "")
        connection.request(method, target, body=body, headers=headers)
        return connection.getresponse()

    def _signed(self, method: str, path: str, query: str, body: bytes,
                extra: dict[str, str]) -> dict[str, str]:
        now = datetime.now(UTC)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(body).hexdigest()
        headers = {"host": self.host, "x-amz-content-sha256": payload, "x-amz-date": stamp,
                   **extra}
        if body:
            headers["content-length"] = str(len(body))
        if self.credentials is None:
            return headers
        names = sorted(headers)
        canonical = "\n".join([method, _quote(path, safe="/~"), query,
                               *(f"{n}:{headers[n]}" for n in names), "", ";".join(names),
                               payload])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.credentials.secret.value).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.credentials.key_id}/{scope},"
            f" SignedHeaders={';'.join(names)}, Signature={signature}")
        return headers

    def _failed(self, what: str, status: int, body: bytes) -> TargetError:
        code = _text(body, "Code") or f"HTTP {status}"
        message = _text(body, "Message")
        anonymous = (" (no credentials were found: AWS_ACCESS_KEY_ID and"
                     " AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials)"
                     if status == 403 and self.credentials is None else "")
        return TargetError(f"S3 endpoint {self.url}: {what}: {code}"
                           + (f" ({message})" if message else "") + anonymous)

    def bucket_exists(self, bucket: str) -> bool:
        status, body = self.request("HEAD", f"/{bucket}")
        if status == 404:
            return False
        if status in (301, 400) and not body:
            raise TargetError(f"S3 endpoint {self.url}: bucket {bucket!r} answers HTTP {status}"
                              f" to region {self.region!r}: give its region (--region, or"
                              " AWS_REGION)")
        if status == 403:
            raise TargetError(f"S3 endpoint {self.url}: access to bucket {bucket!r} is denied"
                              " (HTTP 403): check the credentials"
                              + (f" ({self.credentials.source})" if self.credentials else
                                 " (none were found: AWS_ACCESS_KEY_ID, AWS_PROFILE,"
                                 " ~/.aws/credentials)"))
        if status >= 300:
            raise self._failed(f"HEAD bucket {bucket!r}", status, body)
        return True

    def create_bucket(self, bucket: str) -> None:
        body = b""
        if self.region != "us-east-1":
            body = (b'<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                    b"<LocationConstraint>" + self.region.encode()
                    + b"</LocationConstraint></CreateBucketConfiguration>")
        status, answer = self.request("PUT", f"/{bucket}", body=body)
        if status >= 300:
            raise self._failed(f"creating bucket {bucket!r}", status, answer)

    def put(self, bucket: str, key: str, body: bytes) -> None:
        status, answer = self.request("PUT", f"/{bucket}/{key}", body=body)
        if status >= 300:
            raise self._failed(f"PUT {key!r}", status, answer)

    def get(self, bucket: str, key: str) -> bytes | None:
        status, answer = self.request("GET", f"/{bucket}/{key}")
        if status == 404:
            return None
        if status >= 300:
            raise self._failed(f"GET {key!r}", status, answer)
        return answer

    def delete(self, bucket: str, key: str) -> None:
        status, answer = self.request("DELETE", f"/{bucket}/{key}")
        if status >= 300 and status != 404:
            raise self._failed(f"DELETE {key!r}", status, answer)

    def delete_many(self, bucket: str, keys: list[str]) -> None:
        """Delete up to 1,000 keys in one request (S3's DeleteObjects); one by one where
        the server does not know it."""
        from xml.sax.saxutils import escape

        body = ("<Delete><Quiet>true</Quiet>" + "".join(
            f"<Object><Key>{escape(k)}</Key></Object>" for k in keys) + "</Delete>").encode()
        md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        status, answer = self.request("POST", f"/{bucket}", {"delete": ""}, body,
                                      {"content-md5": md5})
        if status in (400, 405, 501) and b"<Deleted>" not in answer and (
                b"NotImplemented" in answer or b"MethodNotAllowed" in answer or not answer):
            for key in keys:
                self.delete(bucket, key)
            return
        if status >= 300:
            raise self._failed(f"deleting {len(keys)} keys", status, answer)
        if b"<Error>" in answer:
            raise self._failed(f"deleting {len(keys)} keys", status, answer)

    def listing(self, bucket: str, prefix: str, delimiter: str = "") -> Iterator[str]:
        """The keys under ``prefix`` (with a delimiter: also the common prefixes), every
        page of them."""
        token = ""
        while True:
            query = {"list-type": "2", "prefix": prefix, "max-keys": "1000"}
            if delimiter:
                query["delimiter"] = delimiter
            if token:
                query["continuation-token"] = token
            status, body = self.request("GET", f"/{bucket}", query)
            if status >= 300:
                raise self._failed(f"listing {prefix!r}", status, body)
            root = ET.fromstring(body)
            for element in root.iter():
                tag = element.tag.rsplit("}", 1)[-1]
                if tag in ("Key", "Prefix") and element.text and element.text != prefix:
                    yield element.text
            token = _text(body, "NextContinuationToken")
            if not token:
                return


def _quote(text: str, safe: str = "~") -> str:
    return urllib.parse.quote(text, safe=safe)


def _text(body: bytes, tag: str) -> str:
    found = re.search(rb"<%s>([^<]*)</%s>" % (tag.encode(), tag.encode()), body)
    return found.group(1).decode(errors="replace") if found else ""


def error_code(body: bytes) -> str:
    """An S3 error's Code ("NoSuchKey"), or "" when the body is none."""
    return _text(body, "Code")


# -- where the endpoint and credentials come from ------------------------------------------

def _profile(path: Path, section: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc.message}") from None
    return dict(parser[section]) if parser.has_section(section) else {}


def resolve(endpoint: str | None, region: str | None,
            env: dict[str, str] | None = None) -> Endpoint:
    """The endpoint as AWS's tools find it: ``--endpoint`` / ``--region``, else
    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION, then the
    profile's (AWS_PROFILE, else default) ``endpoint_url`` and ``region`` in
    ~/.aws/config (AWS_CONFIG_FILE); the keys from AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY, else the profile's in ~/.aws/credentials
    (AWS_SHARED_CREDENTIALS_FILE)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    config = _profile(Path(env.get("AWS_CONFIG_FILE") or home / ".aws/config"),
                      "default" if profile == "default" else f"profile {profile}")
    url = (endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
           or config.get("endpoint_url") or "")
    region = (region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
              or config.get("region") or "us-east-1")
    if not url:
        url = f"https://s3.{region}.amazonaws.com"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in (
            "", "/") or parts.query or parts.username or parts.password:
        raise ConfigError(f"--endpoint {url!r}: give http(s)://HOST[:PORT], nothing after it"
                          " (the bucket is the TARGET's: s3://BUCKET)")
    if not re.fullmatch(r"[a-z]{2}(-[a-z0-9]+)+-\d+|[a-z0-9-]{1,40}", region):
        raise ConfigError(f"region {region!r} is not a region name (e.g. eu-west-1)")
    creds: Credentials | None = None
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        creds = Credentials(env["AWS_ACCESS_KEY_ID"], keep_secret(env["AWS_SECRET_ACCESS_KEY"]),
                            "AWS_ACCESS_KEY_ID")
    else:
        shared = _profile(Path(env.get("AWS_SHARED_CREDENTIALS_FILE")
                               or home / ".aws/credentials"), profile)
        if shared.get("aws_access_key_id") and shared.get("aws_secret_access_key"):
            creds = Credentials(shared["aws_access_key_id"],
                                keep_secret(shared["aws_secret_access_key"]),
                                f"profile {profile}")
    if creds is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", creds.key_id):
        raise ConfigError(f"the access key id from {creds.source} is not one (letters,"
                          " digits, '.', '_', '-')")
    if creds is not None and any(c in creds.secret.value for c in "\n\r\0"):
        raise ConfigError(f"the secret key from {creds.source} holds a line break")
    return Endpoint(f"{parts.scheme}://{parts.netloc}", region, creds)


def link_to(host: str) -> dict[str, object]:
    """The interface this machine reaches ``host`` through (`ip route get`) and its speed
    in Mb/s as the kernel says it (/sys/class/net/IF/speed: none for loopback, a bridge or
    a link that does not say): a GET rate above it came from a cache on this side of it
    (analysis/caches.beyond_link). {} when the route cannot be read."""
    try:
        address = socket.getaddrinfo(host, None)[0][4][0]
        proc = subprocess.run(["ip", "-j", "route", "get", str(address)], capture_output=True,
                              text=True, timeout=10)
        dev = str(json.loads(proc.stdout)[0]["dev"]) if proc.returncode == 0 else ""
    except (OSError, ValueError, IndexError, KeyError, subprocess.SubprocessError):
        return {}
    if not dev or "/" in dev:
        return {}
    found: dict[str, object] = {"interface": dev}
    with contextlib.suppress(OSError, ValueError):  # lo: EINVAL
        speed = int(Path(f"/sys/class/net/{dev}/speed").read_text())
        if speed > 0:
            found["speed_mbps"] = speed
    return found
