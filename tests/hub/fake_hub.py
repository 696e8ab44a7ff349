"""A local stand-in for the HuggingFace Hub: the requests huggingface_hub 2.4 makes to push a
folder without Xet (``HF_HUB_DISABLE_XET``), answered in memory, with every request recorded
and each branch's files reassembled on disk.

Endpoints (``_commit_api.py``, ``hf_api.py`` and ``lfs.py`` of huggingface_hub 2.4):

- ``POST /api/repos/create`` (``create_repo``; 409 when it exists, which ``exist_ok`` accepts)
- ``GET /api/models/ORG/NAME[/revision/REV]`` (repo info: ``create_commit`` asks it when
  every file is unchanged)
- ``POST /api/models/ORG/NAME/branch/BRANCH`` (``create_branch``)
- ``POST /api/validate-yaml`` (``create_commit`` validates a README.md's front matter)
- ``POST /api/models/ORG/NAME/preupload/REV`` (upload mode per file: ``lfs`` for
  safetensors, images and binary samples, like the Hub's .gitattributes; ``regular``
  otherwise; the oid of an unchanged file, so a repeated push is a no-op)
- ``POST /ORG/NAME.git/info/lfs/objects/batch`` (LFS batch API, ``basic`` transfer)
- ``PUT /lfs-upload/OID`` (the "presigned" upload URL the batch answer hands out)
- ``POST /api/models/ORG/NAME/commit/REV`` (ndjson: header, ``file`` base64, ``lfsFile``)

With hf_xet installed and Xet enabled, huggingface_hub would instead ask
``/api/models/ORG/NAME/xet-write-token/REV`` and talk to a Xet CAS server; that choice is
made on the client alone (``is_xet_available()``), so the tests disable Xet. Such a request
is answered 404 and shows up in :attr:`FakeHub.requests`.

``fail(method, pattern, status, times)`` makes matching requests fail (``status=None``:
drop the connection without an answer); ``times=None`` fails them forever.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml
from local_server import LocalServer, send_json

LFS_SUFFIXES = (".safetensors", ".bin", ".png", ".pt", ".onnx")
GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
REPO = r"(?P<repo>[^/]+/[^/]+)"


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Failure:
    method: str
    pattern: re.Pattern
    status: int | None
    remaining: int | None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Blob:
    content: bytes
    lfs: bool

    @property
    def oid(self) -> str:
        """What huggingface_hub compares with its local oid: sha256 (LFS) or git blob sha1."""
        if self.lfs:
            return hashlib.sha256(self.content).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(self.content) + self.content).hexdigest()


@dataclass
class Repo:
    repo_id: str
    private: bool | None
    branches: dict[str, dict[str, Blob]]
    heads: dict[str, str]


class FakeHub(LocalServer):
    def __init__(self, root: Path, token: str | None = None) -> None:
        self.root = root
        self.token = token
        self.requests: list[Recorded] = []
        self.refused: list[str] = []
        """URLs of other hosts the tests' HTTP client refused (see conftest.fake_hub)."""
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.failures: list[Failure] = []
        self.lock = threading.Lock()
        super().__init__(_Handler)

    @property
    def endpoint(self) -> str:
        return self.address

    # -- what tests use --------------------------------------------------------------
    def fail(self, method: str, pattern: str, status: int | None = 500,
             times: int | None = 1, headers: dict[str, str] | None = None) -> None:
        self.failures.append(Failure(method, re.compile(pattern), status, times,
                                     headers or {}))

    def calls(self, method: str | None = None, pattern: str = "") -> list[Recorded]:
        return [r for r in self.requests if (method is None or r.method == method)
                and re.search(pattern, r.path)]

    def repo_dir(self, repo_id: str, revision: str = "main") -> Path:
        return self.root / repo_id / revision

    # -- the server side -------------------------------------------------------------
    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        path = unquote(split.path)
        body = _read_body(handler)
        with self.lock:
            self.requests.append(Recorded(handler.command, path, split.query,
                                          {k.lower(): v for k, v in handler.headers.items()},
                                          body))
            failure = self._failure(handler.command, path)
        if failure is not None:
            if failure.status is None:
                handler.close_connection = True  # no answer at all: a dropped connection
                return
            return send_json(handler, failure.status, {"error": "injected failure"},
                         failure.headers)
        if not path.startswith("/lfs-upload/") and not self._authorized(handler):
            return send_json(handler, 401, {"error": "Invalid credentials in Authorization header"})
        with self.lock:
            status, payload, headers = self._route(handler.command, path, body)
        send_json(handler, status, payload, headers)

    def _failure(self, method: str, path: str) -> Failure | None:
        for failure in self.failures:
            if failure.method == method and failure.pattern.search(path) and \
                    failure.remaining != 0:
                if failure.remaining is not None:
                    failure.remaining -= 1
                return failure
        return None

    def _authorized(self, handler: BaseHTTPRequestHandler) -> bool:
        given = handler.headers.get("Authorization", "")
        return given.startswith("Bearer ") and (self.token is None
                                                or given == f"Bearer {self.token}")

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, object, dict]:
        routes = [
            ("POST", r"/api/repos/create", self._create_repo),
            ("POST", r"/api/validate-yaml", self._validate_yaml),
            ("POST", rf"/api/models/{REPO}/branch/(?P<rev>.+)", self._create_branch),
            ("POST", rf"/api/models/{REPO}/preupload/(?P<rev>.+)", self._preupload),
            ("POST", rf"/api/models/{REPO}/commit/(?P<rev>.+)", self._commit),
            ("GET", rf"/api/models/{REPO}(/revision/(?P<rev>.+))?", self._repo_info),
            ("POST", rf"/{REPO}\.git/info/lfs/objects/batch", self._lfs_batch),
            ("PUT", r"/lfs-upload/(?P<oid>[0-9a-f]{64})", self._lfs_upload),
        ]
        for route_method, pattern, action in routes:
            match = re.fullmatch(pattern, path)
            if match and method == route_method:
                return action(body=body, **{k: v for k, v in match.groupdict().items()
                                            if v is not None})
        return 404, {"error": f"fake Hub: no route for {method} {path}"}, {}

    def _branch(self, repo: str, rev: str) -> tuple[Repo | None, dict | None, tuple | None]:
        if repo not in self.repos:
            return None, None, (404, {"error": "Repository not found"},
                                {"X-Error-Code": "RepoNotFound"})
        if rev not in self.repos[repo].branches:
            return None, None, (404, {"error": "Revision not found"},
                                {"X-Error-Code": "RevisionNotFound"})
        return self.repos[repo], self.repos[repo].branches[rev], None

    def _create_repo(self, body: bytes) -> tuple[int, object, dict]:
        data = json.loads(body)
        repo_id = f"{data['organization']}/{data['name']}"
        url = f"{self.endpoint}/{repo_id}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this model repo", "url": url}, {}
        files = {".gitattributes": Blob(GITATTRIBUTES, lfs=False)}
        self.repos[repo_id] = Repo(repo_id, data.get("visibility") == "private",
                                   {"main": files}, {"main": _commit_oid(files)})
        self._write(repo_id, "main")
        return 200, {"url": url, "name": repo_id, "id": repo_id}, {}

    def _repo_info(self, body: bytes, repo: str, rev: str = "main") -> tuple[int, object, dict]:
        found, files, error = self._branch(repo, rev)
        if error:
            return error
        return 200, {"id": repo, "modelId": repo, "sha": found.heads[rev],
                     "private": bool(found.private),
                     "siblings": [{"rfilename": name} for name in sorted(files)]}, {}

    def _create_branch(self, body: bytes, repo: str, rev: str) -> tuple[int, object, dict]:
        start = (json.loads(body) if body else {}).get("startingPoint") or "main"
        found, files, error = self._branch(repo, start)
        if error:
            return error
        if rev in found.branches:
            return 409, {"error": f"Reference already exists: refs/heads/{rev}"}, {}
        found.branches[rev] = dict(files)
        found.heads[rev] = found.heads[start]
        self._write(repo, rev)
        return 200, {}, {}

    def _validate_yaml(self, body: bytes) -> tuple[int, object, dict]:
        content = json.loads(body)["content"]
        match = re.match(r"\s*---\r?\n(.*?)\r?\n---", content, re.DOTALL)
        try:
            metadata = yaml.safe_load(match.group(1)) if match else None
        except yaml.YAMLError as err:
            return 400, {"errors": [{"message": f"invalid YAML: {err}"}]}, {}
        if not isinstance(metadata, dict):
            return 200, {"errors": [], "warnings": [{"message": "empty or missing yaml "
                                                                "metadata in repo card"}]}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def _preupload(self, body: bytes, repo: str, rev: str) -> tuple[int, object, dict]:
        _, files, error = self._branch(repo, rev)
        if error:
            return error
        answer = []
        for entry in json.loads(body)["files"]:
            sample = base64.b64decode(entry["sample"])
            lfs = entry["path"].endswith(LFS_SUFFIXES) or b"\0" in sample \
                or entry["size"] >= 10_000_000
            existing = files.get(entry["path"])
            answer.append({"path": entry["path"], "uploadMode": "lfs" if lfs else "regular",
                           "shouldIgnore": False,
                           "oid": existing.oid if existing is not None else None})
        return 200, {"files": answer, "commitOid": _commit_oid(files)}, {}

    def _lfs_batch(self, body: bytes, repo: str) -> tuple[int, object, dict]:
        if repo not in self.repos:
            return 404, {"message": "Repository not found"}, {}
        objects = []
        for obj in json.loads(body)["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs_objects:
                entry["actions"] = {"upload": {"href": f"{self.endpoint}/lfs-upload/"
                                                       f"{obj['oid']}"}}
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}, \
            {"Content-Type": "application/vnd.git-lfs+json"}

    def _lfs_upload(self, body: bytes, oid: str) -> tuple[int, object, dict]:
        if hashlib.sha256(body).hexdigest() != oid:
            return 400, {"error": "content does not match its oid"}, {}
        self.lfs_objects[oid] = body
        return 200, {}, {}

    def _commit(self, body: bytes, repo: str, rev: str) -> tuple[int, object, dict]:
        found, files, error = self._branch(repo, rev)
        if error:
            return error
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0]["key"] != "header":
            return 400, {"error": "the commit starts with a header"}, {}
        updated = dict(files)
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                updated[value["path"]] = Blob(base64.b64decode(value["content"]), lfs=False)
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    return 400, {"error": f"LFS object of {value['path']} was not uploaded"}, {}
                updated[value["path"]] = Blob(self.lfs_objects[value["oid"]], lfs=True)
            elif line["key"] in ("deletedFile", "deletedFolder"):
                updated = {p: b for p, b in updated.items()
                           if p != value["path"] and not p.startswith(value["path"] + "/")}
            else:
                return 400, {"error": f"unknown commit operation {line['key']}"}, {}
        found.branches[rev] = updated
        found.heads[rev] = oid = _commit_oid(updated)
        self._write(repo, rev)
        return 200, {"success": True, "commitOid": oid,
                     "commitUrl": f"{self.endpoint}/{repo}/commit/{oid}",
                     "commitMessage": lines[0]["value"]["summary"]}, {}

    def _write(self, repo: str, rev: str) -> None:
        folder = self.repo_dir(repo, rev)
        shutil.rmtree(folder, ignore_errors=True)
        for name, blob in self.repos[repo].branches[rev].items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.content)


def _commit_oid(files: dict[str, Blob]) -> str:
    digest = hashlib.sha1()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].oid.encode())
    return digest.hexdigest()


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.owner.handle(self)

    do_POST = do_PUT = do_HEAD = do_GET

    def log_message(self, format: str, *args) -> None:  # keep test output clean
        pass
