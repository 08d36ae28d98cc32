"""The container deployment, proven without a Docker engine: the gateway is started from the
command the image runs (its ENTRYPOINT and CMD, read from the Dockerfile), with the image's ENV
and the compose file's environment, and checked as Docker would (its HEALTHCHECK) and as users
do (boto3), across a restart; and every S3GW_* variable those files name is one the gateway
reads.

What this cannot prove: that the image builds, and what the engine does (the volume's
ownership, the published port, the restart policy). Those need `docker compose up`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML: installed with awscli, which the test extra has

from gateway import tls
from gateway.config import _OPTIONS, env_default, env_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
SERVICE = "s3gw"
# Where the image's executables are (/usr/local/bin in python:slim) is, here, this virtualenv.
BIN = Path(sys.executable).parent
_LISTENING = re.compile(r"s3gw listening on (https?://\S+)")


# --- the Dockerfile --------------------------------------------------------------------------


@dataclass
class Image:
    """What the Dockerfile's last stage gives a container."""

    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    expose: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    user: str = "root"
    exec_form: dict[str, bool] = field(default_factory=dict)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined. Comment lines go, even within a
    continued instruction, as Docker drops them."""
    found: list[tuple[str, str]] = []
    current = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or (not line.strip()):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        keyword, _, arguments = (current + line).strip().partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        current = ""
    return found


def _command(arguments: str) -> tuple[list[str], bool]:
    """An exec-form (JSON) or shell-form command, and whether it was exec form."""
    if arguments.startswith("["):
        return json.loads(arguments), True
    return ["/bin/sh", "-c", arguments], False


def _env_pairs(arguments: str) -> dict[str, str]:
    words = shlex.split(arguments)
    if "=" not in words[0]:  # the legacy `ENV NAME value` form
        return {words[0]: arguments.split(None, 1)[1]}
    return dict(word.split("=", 1) for word in words)


def read_dockerfile(path: Path = DOCKERFILE) -> Image:
    image = Image()
    for keyword, arguments in instructions(path.read_text()):
        if keyword == "FROM":
            image = Image()  # only the last stage is the image
        elif keyword == "ENV":
            image.env.update(_env_pairs(arguments))
        elif keyword in ("ENTRYPOINT", "CMD"):
            command, exec_form = _command(arguments)
            setattr(image, keyword.lower(), command)
            image.exec_form[keyword] = exec_form
        elif keyword == "HEALTHCHECK":
            options = re.match(r"((?:--\S+\s+)*)CMD\s+(.*)", arguments, re.S)
            assert options, f"HEALTHCHECK without CMD: {arguments}"
            image.healthcheck = _command(options.group(2))[0]
        elif keyword == "EXPOSE":
            image.expose += [port.split("/")[0] for port in arguments.split()]
        elif keyword == "VOLUME":
            image.volumes += (
                json.loads(arguments) if arguments.startswith("[") else arguments.split()
            )
        elif keyword == "USER":
            image.user = arguments
    return image


# --- the compose file and its .env -----------------------------------------------------------


def read_dotenv(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep, f"{path.name}: not NAME=VALUE: {line}"
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name.strip()] = value
    return values


_INTERPOLATION = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?[-?])([^}]*))?\}|(\w+))")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, $NAME and $$."""

    def substitute(m: re.Match[str]) -> str:
        if m.group(1):
            return "$"
        name, operator, argument = m.group(2) or m.group(5), m.group(3), m.group(4)
        have = env.get(name)
        if operator == ":-":
            return have or argument
        if operator == "-":
            return argument if have is None else have
        if operator in (":?", "?"):
            assert have, f"compose requires {name}: {argument}"
        return have or ""

    return _INTERPOLATION.sub(substitute, value)


def compose_variables(text: str) -> dict[str, str]:
    """Each variable the compose file interpolates, with its default ('' if none)."""
    return {
        m.group(2) or m.group(5): m.group(4) or ""
        for m in _INTERPOLATION.finditer(text)
        if not m.group(1)
    }


def read_compose(path: Path = COMPOSE) -> dict[str, Any]:
    service = yaml.safe_load(path.read_text())["services"][SERVICE]
    assert isinstance(service, dict)
    return service


def container_environment(
    image: Image, service: dict[str, Any], dotenv: Mapping[str, str]
) -> dict[str, str]:
    """The container's environment: the image's ENV, then the service's environment with
    the values compose interpolates from a .env file (and nothing from the shell)."""
    env = dict(image.env)
    declared = service.get("environment") or {}
    if isinstance(declared, list):
        declared = dict((item.split("=", 1) if "=" in item else (item, None)) for item in declared)
    for name, value in declared.items():
        if value is None:  # a bare name: passed from .env or the shell, or left unset
            if name in dotenv:
                env[name] = dotenv[name]
        else:
            env[name] = interpolate(str(value), dotenv)
    return env


def container_command(image: Image, service: dict[str, Any]) -> list[str]:
    """ENTRYPOINT + CMD, as the service may override them (a new entrypoint drops CMD)."""
    entrypoint, cmd = image.entrypoint, image.cmd
    if "entrypoint" in service:
        entrypoint, cmd = _as_list(service["entrypoint"]), []
    if "command" in service:
        cmd = _as_list(service["command"])
    return entrypoint + cmd


def _as_list(value: str | list[str]) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else list(value)


# --- running it here -------------------------------------------------------------------------


def _here(argv: list[str]) -> list[str]:
    """The same command, with its program found where this machine has it."""
    program = shutil.which(argv[0], path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert program, f"{argv[0]} not found"
    return [program, *argv[1:]]


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


class Container:
    """The image's command as a local process: the addresses and the data folder are the only
    changes (127.0.0.1 on free ports, a temporary folder)."""

    def __init__(self, argv: list[str], env: dict[str, str], data: Path) -> None:
        assert _flag_value(argv, "--address") is None and _flag_value(argv, "--data") is None, (
            "the test rewrites S3GW_ADDRESS and S3GW_DATA, not flags: keep them in ENV"
        )
        self.argv = _here(argv)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("S3GW_", "AWS_"))},
            **env,
            "S3GW_ADDRESS": "127.0.0.1:0",
            "S3GW_DATA": str(data),
        }
        if self.env.get("S3GW_CONSOLE_ADDRESS"):  # on, as the compose file has it
            self.env["S3GW_CONSOLE_ADDRESS"] = "127.0.0.1:0"
        self.data = data
        self.url = ""
        self.log: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Container:
        self.log.clear()
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if m := _LISTENING.search(line):
                self.url = m.group(1)
                break
        else:
            raise AssertionError("the gateway did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return self

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log.append(line)

    def stop(self) -> int:
        """SIGTERM, as `docker stop` sends it; the exit status."""
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                # docker stop's default grace period before its SIGKILL
                return proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError("no exit within 10 s of SIGTERM") from None
        return proc.returncode

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def credentials(self) -> tuple[str, str]:
        """The keys from the environment, or the pair generated into the data folder."""
        if self.env.get("S3GW_ACCESS_KEY") and self.env.get("S3GW_SECRET_KEY"):
            return self.env["S3GW_ACCESS_KEY"], self.env["S3GW_SECRET_KEY"]
        stored = json.loads((self.data / "credentials.json").read_text())
        return stored["access_key"], stored["secret_key"]

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        access, secret = self.credentials()
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=access,
            aws_secret_access_key=secret,
            region_name=self.env.get("S3GW_REGION") or "us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
        )


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _healthcheck(
    command: list[str], image: Image, container: Container, **env: str
) -> subprocess.CompletedProcess[str]:
    """Docker's check, run as Docker runs it: with the container's environment, whose
    address is the image's (0.0.0.0) with this process's port."""
    host = image.env["S3GW_ADDRESS"].rsplit(":", 1)[0]
    env = {**container.env, "S3GW_ADDRESS": f"{host}:{container.port}", **env}
    return subprocess.run(_here(command), env=env, capture_output=True, text=True, timeout=30)


def _run_healthcheck(command: list[str], image: Image, container: Container) -> None:
    done = _healthcheck(command, image, container)
    assert done.returncode == 0, done.stderr


def _image_port(image: Image) -> str:
    return image.env["S3GW_ADDRESS"].rsplit(":", 1)[1]


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    image, service = read_dockerfile(), read_compose()
    server = Container(
        container_command(image, service),
        container_environment(image, service, read_dotenv()),
        tmp_path / "volume",
    )
    yield server
    server.stop()


def _compose_healthcheck(service: dict[str, Any]) -> list[str]:
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    kind, *command = test
    return command if kind == "CMD" else ["/bin/sh", "-c", *command]


# --- the tests -------------------------------------------------------------------------------


def test_image_command_serves_checks_healthy_and_keeps_data_across_restarts(container):
    image, service = read_dockerfile(), read_compose()
    # Exec form: the gateway is PID 1 and gets docker stop's SIGTERM itself.
    assert all(image.exec_form.values()) and image.exec_form, image.exec_form
    container.start()
    assert _status(container.url + "/health/live") == 200
    assert _status(container.url + "/health/ready") == 200
    _run_healthcheck(image.healthcheck, image, container)
    _run_healthcheck(_compose_healthcheck(service), image, container)

    s3 = container.client()
    body = os.urandom(200_000)
    s3.create_bucket(Bucket="deploy")
    s3.put_object(Bucket="deploy", Key="kept/across restarts.bin", Body=body)
    got = s3.get_object(Bucket="deploy", Key="kept/across restarts.bin")["Body"].read()
    assert got == body
    keys = container.credentials()
    assert container.stop() == 0, "".join(container.log)

    # `docker compose down && docker compose up`: a new process, the same volume.
    container.start()
    assert container.credentials() == keys  # generated keys are kept in the volume too
    assert _status(container.url + "/health/ready") == 200
    s3 = container.client()
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["deploy"]
    got = s3.get_object(Bucket="deploy", Key="kept/across restarts.bin")["Body"].read()
    assert got == body
    assert container.stop() == 0, "".join(container.log)


def test_healthcheck_follows_tls(tmp_path):
    # With S3GW_TLS_SELF_SIGNED=1 in .env, the container serves HTTPS only: a check that asks
    # over plain HTTP reports it unhealthy for ever.
    image, service = read_dockerfile(), read_compose()
    env = container_environment(image, service, {**read_dotenv(), "S3GW_TLS_SELF_SIGNED": "1"})
    server = Container(container_command(image, service), env, tmp_path / "volume").start()
    try:
        assert server.url.startswith("https://"), server.url
        _run_healthcheck(image.healthcheck, image, server)
        _run_healthcheck(_compose_healthcheck(service), image, server)
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_healthcheck_trusts_the_served_certificate_only(tmp_path):
    # S3GW_TLS_CERT/S3GW_TLS_KEY: the operator's own certificate, trusted as it is.
    image, service = read_dockerfile(), read_compose()
    cert, key = tls.self_signed(tmp_path / "own")
    other, _ = tls.self_signed(tmp_path / "other")
    env = container_environment(image, service, read_dotenv())
    env |= {"S3GW_TLS_CERT": str(cert), "S3GW_TLS_KEY": str(key)}
    server = Container(container_command(image, service), env, tmp_path / "volume").start()
    try:
        _run_healthcheck(image.healthcheck, image, server)
        # Another certificate than the one served: unhealthy, said in one line.
        done = _healthcheck(image.healthcheck, image, server, S3GW_TLS_CERT=str(other))
        assert done.returncode == 1
        assert done.stderr.startswith("unhealthy: https://127.0.0.1:"), done.stderr
        assert "CERTIFICATE_VERIFY_FAILED" in done.stderr and done.stderr.count("\n") == 1
    finally:
        assert server.stop() == 0, "".join(server.log)
    done = _healthcheck(image.healthcheck, image, server)  # nothing listens any more
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr


def test_image_and_compose_file_agree():
    image, service = read_dockerfile(), read_compose()
    port = _image_port(image)
    data = image.env["S3GW_DATA"]
    assert image.env["S3GW_ADDRESS"] == f"0.0.0.0:{port}"  # reachable from outside
    assert port in image.expose
    assert data in image.volumes
    assert image.user.split(":")[0] not in ("root", "0"), "the gateway must not run as root"

    assert any(str(p).split(":")[-1] == port for p in service["ports"]), service["ports"]
    # Published on loopback unless .env says otherwise: plain HTTP stays on this machine.
    published = [interpolate(str(p), {}) for p in service["ports"]]
    console = interpolate(service["environment"]["S3GW_CONSOLE_ADDRESS"], {}).rpartition(":")[2]
    assert published == [
        f"127.0.0.1:{port}:{port}",
        f"127.0.0.1:{console}:{console}",
        "127.0.0.1:9002:9002",  # the website endpoint's, once S3GW_WEBSITE_ADDRESS is set
    ]
    # A named volume (declared at the top level) at the data folder: `down` keeps it.
    named = yaml.safe_load(COMPOSE.read_text()).get("volumes") or {}
    mounts = [v.split(":") for v in service["volumes"] if isinstance(v, str)]
    assert any(src in named and dst == data for src, dst, *_ in mounts), service["volumes"]
    # Its name is fixed (not compose's <project>_...): the Dockerfile's `docker run -v`
    # example must read the very volume compose writes.
    (volume,) = named.values()
    name = interpolate(volume["name"], {})
    assert f"-v {name}:{data}" in DOCKERFILE.read_text()
    assert service["restart"] == "unless-stopped"
    assert _compose_healthcheck(service) == image.healthcheck
    build = service["build"]
    context = build if isinstance(build, str) else build.get("context", ".")
    assert (COMPOSE.parent / context / "Dockerfile").resolve() == DOCKERFILE

    ignored = {line.strip().strip("/") for line in (ROOT / ".dockerignore").read_text().split()}
    # history, build tools (the benchmark peers' too), data, secrets
    assert {".git", ".venv", ".venv-peers", "data", ".env"} <= ignored

    # Bounded logs (one line per request at the info level), and a container that can
    # change nothing but its volume.
    assert service["logging"]["driver"] == "json-file"
    assert {"max-size", "max-file"} <= set(service["logging"]["options"])
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]


def test_documented_compose_exec_lines_work_without_a_terminal():
    # Compose v1's `exec` allocates a TTY unless told not to: the captured keys end in \r in
    # a terminal, and without one it fails ("the input device is not a TTY").
    for path in (ROOT / "README.md", COMPOSE, ENV_EXAMPLE, DOCKERFILE):
        for line in path.read_text().splitlines():
            for m in re.finditer(r"\bcompose exec\b(.*)", line):
                assert m.group(1).split()[0] == "-T", f"{path.name}: {line.strip()}"


# Variables of the compose file itself (where the port is published, the volume's name),
# never passed to the gateway.
COMPOSE_ONLY = {"S3GW_PUBLISH", "S3GW_CONSOLE_PUBLISH", "S3GW_WEBSITE_PUBLISH", "S3GW_VOLUME"}


def _variables_read_by_the_gateway() -> set[str]:
    return {env_name(flag) for flag, *_ in _OPTIONS} | {env_name("tls-self-signed")}


def test_every_s3gw_variable_is_one_the_gateway_reads():
    read = _variables_read_by_the_gateway()
    for path in (DOCKERFILE, COMPOSE, ENV_EXAMPLE):
        named = set(re.findall(r"\bS3GW_[A-Z0-9_]+\b", path.read_text())) - COMPOSE_ONLY
        assert named, f"{path.name} names no S3GW_ variable"
        assert named <= read, f"{path.name}: the gateway does not read {sorted(named - read)}"


def test_compose_passes_every_setting_to_the_container():
    # The README says the whole Configuration table can be set from .env: a setting compose
    # does not pass is silently ignored. The image itself sets the data folder and address.
    image, service = read_dockerfile(), read_compose()
    passed = set(service["environment"]) | set(image.env)
    missing = _variables_read_by_the_gateway() - passed
    assert not missing, f"docker-compose.yml does not pass {sorted(missing)}"
    assert not COMPOSE_ONLY & set(service["environment"])


def test_env_example_documents_compose_variables_with_the_gateways_defaults():
    variables = compose_variables(COMPOSE.read_text())
    example = read_dotenv()
    # Every variable compose reads is in .env.example, and copying it to .env changes nothing.
    assert set(example) == set(variables)
    assert example == variables
    # A default is the gateway's own: empty stands for an option with no default.
    for name, default in variables.items():
        if not name.startswith("S3GW_") or name in COMPOSE_ONLY:
            continue
        flag = name.removeprefix("S3GW_").lower().replace("_", "-")
        if flag == "console-address":
            # The compose file turns the console on (the gateway's default is none).
            assert default == "0.0.0.0:9001", name
            continue
        if flag == "tls-self-signed":
            assert default in ("", "0"), name
            continue
        builtin = env_default(flag, {})
        assert default == ("" if builtin is None else str(builtin)), name


def _duration(text: str) -> float:
    """A compose duration: `30s`, `1m30s`, `1.5m`."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"([\d.]+)(h|ms|us|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)


def test_the_gateways_grace_period_ends_before_dockers_sigkill():
    # docker stop sends SIGKILL when stop_grace_period ends: the gateway must have closed
    # what its own grace period left by then, with time to spare for closing the store.
    image, service = read_dockerfile(), read_compose()
    env = container_environment(image, service, read_dotenv())
    grace = env_default("shutdown-timeout", env)
    drain = env_default("drain-seconds", env)
    assert isinstance(grace, float) and isinstance(drain, float) and drain > 0
    assert drain + grace + 2 <= _duration(service["stop_grace_period"])
    # So too each node of the cluster file.
    for name, node in _cluster_nodes().items():
        env = container_environment(image, node, read_dotenv())
        grace, drain = env_default("shutdown-timeout", env), env_default("drain-seconds", env)
        assert drain + grace + 2 <= _duration(node["stop_grace_period"]), name


def test_the_console_port_is_published_where_its_setting_says():
    service = read_compose()
    setting = service["environment"]["S3GW_CONSOLE_ADDRESS"]
    console = interpolate(setting, {}).rpartition(":")[2]
    published = [
        interpolate(str(p), {"S3GW_CONSOLE_PUBLISH": "0.0.0.0:9101"}) for p in service["ports"]
    ]
    assert f"0.0.0.0:9101:{console}" in published, published
    # .env's S3GW_CONSOLE_ADDRESS reaches the container (it was fixed at 0.0.0.0:9001), and
    # empty turns the console off.
    assert interpolate(setting, {"S3GW_CONSOLE_ADDRESS": "127.0.0.1:9001"}) == "127.0.0.1:9001"
    assert interpolate(setting, {"S3GW_CONSOLE_ADDRESS": ""}) == ""


def test_the_website_port_is_published_where_its_setting_says():
    # Off by default (the gateway's own default); 0.0.0.0:9002 in .env serves it on the
    # published port, in the single gateway's file and through the cluster's HAProxy.
    service = read_compose()
    setting = service["environment"]["S3GW_WEBSITE_ADDRESS"]
    assert interpolate(setting, {}) == ""
    assert interpolate(setting, {"S3GW_WEBSITE_ADDRESS": "0.0.0.0:9002"}) == "0.0.0.0:9002"
    published = [
        interpolate(str(p), {"S3GW_WEBSITE_PUBLISH": "0.0.0.0:9102"}) for p in service["ports"]
    ]
    assert "0.0.0.0:9102:9002" in published, published
    haproxy = yaml.safe_load(CLUSTER.read_text())["services"]["haproxy"]
    assert "${S3GW_WEBSITE_PUBLISH:-127.0.0.1:9002}:9002" in haproxy["ports"]
    lines = _haproxy_lines()
    assert "bind :9002" in lines
    servers = [line for line in lines if line.startswith("server ") and ":9002" in line]
    assert len(servers) == 3 and all("check port 9000" in line for line in servers), servers


# --- the cluster file and its load balancer --------------------------------------------------

CLUSTER = ROOT / "docker-compose.cluster.yml"
HAPROXY = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
# The single gateway's settings a node does without: its catalog is S3GW_CLUSTER_CATALOG's,
# HAProxy speaks (and checks) plain HTTP to the nodes, and no node's console port is published.
NOT_FOR_NODES = {
    "S3GW_CATALOG",
    "S3GW_TLS_SELF_SIGNED",
    "S3GW_TLS_CERT",
    "S3GW_TLS_KEY",
    "S3GW_CONSOLE_ADDRESS",
}


def _cluster_nodes() -> dict[str, dict[str, Any]]:
    services = yaml.safe_load(CLUSTER.read_text())["services"]
    return {name: s for name, s in services.items() if s.get("image", "").startswith("s3gw:")}


def test_cluster_nodes_get_the_single_gateways_settings():
    single = read_compose()["environment"]
    nodes = _cluster_nodes()
    assert len(nodes) == 3
    for name, node in nodes.items():
        env = node["environment"]
        missing = set(single) - NOT_FOR_NODES - set(env)
        assert not missing, f"{name} is not passed {sorted(missing)}"
        # The same variable, with the same default, as docker-compose.yml (and .env.example).
        for variable in set(single) - NOT_FOR_NODES:
            assert env[variable] == single[variable], (name, variable)
        assert not (set(env) & (NOT_FOR_NODES - {"S3GW_CATALOG"})), name
        assert "S3GW_CLUSTER_CATALOG" in env["S3GW_CATALOG"]


def _haproxy_lines() -> list[str]:
    """The configuration's lines, without comments (no value in it holds a #)."""
    lines = (line.split("#", 1)[0].strip() for line in HAPROXY.read_text().splitlines())
    return [line for line in lines if line]


def test_haproxy_takes_a_draining_node_out_within_its_drain():
    (default_server,) = [line for line in _haproxy_lines() if line.startswith("default-server")]
    words = default_server.split()
    inter = _duration(words[words.index("inter") + 1])
    fall = int(words[words.index("fall") + 1])
    assert "check" in words
    assert any(line == "option httpchk GET /health/ready" for line in _haproxy_lines())
    drain = env_default("drain-seconds", {})
    assert isinstance(drain, float)
    # Checks `fall` times `inter` apart, the last answered within a second: out before the
    # drain ends, and with it the port.
    assert inter * fall + 1 < drain, (inter, fall, drain)


def test_haproxy_logs_no_query_string():
    # A presigned URL's query holds its signature: the request line is logged without it.
    lines = _haproxy_lines()
    assert not any(line.startswith("option httplog") for line in lines)
    (log_format,) = [line for line in lines if line.startswith("log-format")]
    fields = set(re.findall(r"%(?:\{[^}]*\})?(\w+)", log_format))
    assert "HP" in fields and "HM" in fields
    assert not fields & {"r", "HU", "HQ"}, fields


def test_haproxy_tries_another_node_soon_when_one_is_gone():
    # A killed node answers no connection: HAProxy gives up on it within a second and sends
    # the request to another node (one GET took 5.01 s behind a 5 s connect timeout).
    lines = _haproxy_lines()
    (connect,) = [line for line in lines if line.startswith("timeout connect")]
    assert _duration(connect.split()[-1]) <= 1.0, connect
    assert any(line.split()[:2] == ["option", "redispatch"] for line in lines)
    (retries,) = [line for line in lines if line.startswith("retries")]
    assert int(retries.split()[1]) >= 2
    (retry_on,) = [line for line in lines if line.startswith("retry-on")]
    assert "conn-failure" in retry_on.split()


# --- the SeaweedFS file: the nodes' blobs below, no shared volume ----------------------------

SEAWEED = ROOT / "docker-compose.seaweed.yml"
# What its nodes set otherwise than the single gateway: the blob tier (the bundled SeaweedFS,
# its keys in the secrets volume's credentials file, which keys in the environment would
# contradict), beside the cluster file's differences.
SEAWEED_OWN = {
    "S3GW_BLOBS",
    "S3GW_BLOBS_ENDPOINT",
    "S3GW_BLOBS_CREDENTIALS",
    "S3GW_BLOBS_ACCESS_KEY",
    "S3GW_BLOBS_SECRET_KEY",
}


def _seaweed_services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(SEAWEED.read_text())["services"])


def test_seaweed_nodes_get_the_single_gateways_settings_and_own_volumes():
    single = read_compose()["environment"]
    services = _seaweed_services()
    nodes = {name: s for name, s in services.items() if name.startswith("s3gw-node")}
    assert len(nodes) == 2
    image = read_dockerfile()
    data_volumes = set()
    for name, node in nodes.items():
        env = node["environment"]
        kept = set(single) - NOT_FOR_NODES - SEAWEED_OWN
        missing = kept - set(env)
        assert not missing, f"{name} is not passed {sorted(missing)}"
        for variable in kept:
            assert env[variable] == single[variable], (name, variable)
        assert "S3GW_CLUSTER_CATALOG" in env["S3GW_CATALOG"]
        assert interpolate(env["S3GW_BLOBS"], {}).startswith("s3://")
        assert interpolate(env["S3GW_BLOBS_ENDPOINT"], {}) == "http://seaweedfs:8333"
        assert not {"S3GW_BLOBS_ACCESS_KEY", "S3GW_BLOBS_SECRET_KEY"} & set(env), name
        # No volume shared with another node; the secrets read-only.
        volumes = node["volumes"]
        (data,) = [v for v in volumes if v.endswith(":/data")]
        data_volumes.add(data)
        assert "s3gw-seaweed-secrets:/secrets:ro" in volumes
        # The keys copied before the gateway starts; the gateway then PID 1 (exec).
        script = node["entrypoint"][-1]
        assert script.startswith("set -e;") and script.endswith("exec s3gw serve"), script
        grace = container_environment(image, node, read_dotenv())
        shutdown, drain = (
            env_default("shutdown-timeout", grace),
            env_default("drain-seconds", grace),
        )
        assert drain + shutdown + 2 <= _duration(node["stop_grace_period"]), name
    assert len(data_volumes) == len(nodes), data_volumes
    # The one-shot services run the same program, once each mode, from the gateway's image.
    for name, mode in (("s3gw-secrets", "secrets"), ("s3gw-blob-bucket", "bucket")):
        entry = services[name]["entrypoint"]
        assert entry[:2] == ["python", "-c"] and entry[-1] == mode, name
        assert services[name]["image"] == "s3gw:local"
