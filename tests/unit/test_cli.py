"""The command line works with the runtime dependencies alone (what `make run` and the Docker
image install): nothing from the test extra may be imported on the way."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

BLOCK_TEST_EXTRA = (
    "import sys\n"
    "for name in ('boto3', 'botocore', 'pytest', 'hypothesis', 'awscli'):\n"
    "    sys.modules[name] = None  # importing it now raises ImportError\n"
    "from gateway.cli import main\n"
    "main(sys.argv[1:])\n"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TEST_EXTRA, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_help_without_the_test_extra():
    out = run("serve", "--help")
    assert out.returncode == 0, out.stderr
    assert "--data" in out.stdout and "S3GW_DATA" in out.stdout


def test_credentials_without_the_test_extra(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "credentials.json").write_text('{"access_key": "A", "secret_key": "S"}')
    out = run("credentials", "--data", str(tmp_path / "data"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("export AWS_ACCESS_KEY_ID=")


def test_the_stall_timeouts_default_to_aws_twenty_seconds() -> None:
    # tests/integration/test_hostile.py's stalled clients meet these defaults (it waits for
    # the event, not for a time): AWS answers RequestTimeout after about 20 s of silence.
    import argparse

    from gateway import config

    parser = argparse.ArgumentParser()
    config.add_options(parser)
    settings = config.settings_from(parser.parse_args(["--data", "d"]), env={})
    assert (settings.body_timeout, settings.idle_timeout) == (20.0, 20.0)


def test_blobs_settings_are_checked_at_start() -> None:
    import argparse

    from gateway import config, tiers

    parser = argparse.ArgumentParser()
    config.add_options(parser)
    args = parser.parse_args(["--blobs", "s3://tier/some/prefix/", "--blobs-region", "eu-west-3"])
    keys = {"S3GW_BLOBS_ACCESS_KEY": "a", "S3GW_BLOBS_SECRET_KEY": "s"}
    target = tiers.target(config.settings_from(args, env=keys))
    assert target is not None
    assert (target.bucket, target.prefix) == ("tier", "some/prefix/")
    assert target.endpoint == "https://s3.eu-west-3.amazonaws.com" and target.path_style
    with pytest.raises(config.StartError, match="BLOBS_ACCESS_KEY"):
        config.settings_from(args, env={})
    for wrong in ("/srv/blobs", "s3://", "http://x/y"):
        with pytest.raises(config.StartError, match="s3://BUCKET"):
            config.settings_from(parser.parse_args(["--blobs", wrong]), env=keys)
    default = config.settings_from(parser.parse_args([]), env={})
    assert default.blobs is None and tiers.blob_store(default) is None
    # A file's keys go no further than the tier's settings: the rest is unchanged.
    assert default.blobs_access_key is None


def test_inline_max_is_larger_with_blobs_on_s3_unless_given() -> None:
    import argparse

    from gateway import config

    parser = argparse.ArgumentParser()
    config.add_options(parser)
    keys = {"S3GW_BLOBS_ACCESS_KEY": "a", "S3GW_BLOBS_SECRET_KEY": "s"}
    tier = {**keys, "S3GW_BLOBS": "s3://tier"}

    def inline_max(argv: list[str], env: dict[str, str]) -> int:
        return config.settings_from(parser.parse_args(argv), env=env).inline_max

    assert inline_max([], {}) == config.INLINE_MAX == 64 * 1024
    assert inline_max([], tier) == config.TIER_INLINE_MAX == 256 * 1024
    assert inline_max(["--blobs", "s3://tier"], keys) == 256 * 1024
    # Given, by flag or environment, it is what it says, on either tier (0 included).
    assert inline_max(["--inline-max", "65536"], tier) == 65536
    assert inline_max([], {**tier, "S3GW_INLINE_MAX": "0"}) == 0
    assert inline_max([], {"S3GW_INLINE_MAX": "300000"}) == 300000
    # Empty is unset (compose passes S3GW_INLINE_MAX= when .env leaves it so).
    assert inline_max([], {**tier, "S3GW_INLINE_MAX": ""}) == 256 * 1024


def _blobs_settings(tmp_path, text: str | None, env: dict[str, str] | None = None):
    import argparse

    from gateway import config

    parser = argparse.ArgumentParser()
    config.add_options(parser)
    path = tmp_path / "blobs-credentials"
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)
    env = {"S3GW_BLOBS": "s3://tier", "S3GW_BLOBS_CREDENTIALS": str(path), **(env or {})}
    return config.settings_from(parser.parse_args([]), env=env)


def test_blobs_keys_from_an_aws_shared_credentials_file(tmp_path) -> None:
    from gateway import config, tiers

    # As `aws configure` writes it; other profiles and keys (a session token) are not ours.
    text = (
        "[other]\naws_access_key_id = X\naws_secret_access_key = Y\n\n"
        "[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s%cret/+=\n"
        "region = eu-west-3\n"
    )
    settings = _blobs_settings(tmp_path, text)
    assert (settings.blobs_access_key, settings.blobs_secret_key) == ("AKIA1", "s%cret/+=")
    target = tiers.target(settings)
    assert target is not None and target.secret_key == "s%cret/+="
    # The environment's keys too, if they are the same ones.
    same = {"S3GW_BLOBS_ACCESS_KEY": "AKIA1", "S3GW_BLOBS_SECRET_KEY": "s%cret/+="}
    assert _blobs_settings(tmp_path, text, same).blobs_access_key == "AKIA1"
    # Each mistake is one line naming the setting.
    mistakes = [
        (None, {}, "cannot read it: No such file"),
        ("aws_access_key_id = A\n", {}, "not an INI file"),
        ("[prod]\naws_access_key_id = A\naws_secret_access_key = S\n", {}, r"no \[default\]"),
        ("[default]\naws_access_key_id = A\n", {}, "has no aws_secret_access_key"),
        ("[default]\naws_secret_access_key = S\n", {}, "has no aws_access_key_id$"),
        (text, {"S3GW_BLOBS_SECRET_KEY": "other"}, "BLOBS_SECRET_KEY and .* different keys"),
        (text, {"S3GW_BLOBS_ACCESS_KEY": "AKIA2"}, "BLOBS_ACCESS_KEY and .* different keys"),
    ]
    for content, env, message in mistakes:
        with pytest.raises(config.StartError, match=message) as caught:
            _blobs_settings(tmp_path, content, env)
        assert "\n" not in str(caught.value)
        assert "--blobs-credentials/S3GW_BLOBS_CREDENTIALS" in str(caught.value)
    # The tier runs on the product's dependencies: no botocore.
    code = (
        "import sys\nsys.modules['botocore'] = sys.modules['boto3'] = None\nimport gateway.tiers.s3"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def _flags(help_text: str) -> set[str]:
    """The options a help lists (each at the start of its line; not those its texts name)."""
    return set(re.findall(r"^ {2}(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text, re.MULTILINE))


def test_each_command_lists_only_its_own_flags_in_its_help():
    helps = {}
    for command in ("serve", "credentials", "fsck", "migrate", "replicate resync", "keys"):
        out = run(*command.split(), "--help")
        assert out.returncode == 0, out.stderr
        helps[command] = _flags(out.stdout)
    # credentials reads where the keys are and the region it exports, nothing of serving.
    assert helps["credentials"] == {
        "--help",
        "--data",
        "--access-key",
        "--secret-key",
        "--users",
        "--region",
    }
    assert {"--workers", "--tls-self-signed", "--console-address"} <= helps["serve"]
    assert helps["fsck"] == {
        "--help",
        "--data",
        "--catalog",
        "--blobs",
        "--blobs-endpoint",
        "--blobs-region",
        "--blobs-addressing",
        "--blobs-ca",
        "--blobs-credentials",
        "--deep",
        "--repair",
    }
    # With --blobs-to it reads where the catalog and the blobs are, as fsck does.
    assert helps["migrate"] == helps["fsck"] - {"--deep", "--repair"} | {
        "--to",
        "--blobs-to",
        "--batch",
        "--sample",
    }
    assert helps["keys"] == {"--help", "--data"}
    # resync opens the folder as fsck does (its catalog and blob tier), and names a rule.
    assert helps["replicate resync"] == helps["fsck"] - {"--deep", "--repair"} | {"--rule"}


def test_credentials_takes_its_own_flags_and_no_serving_flag(tmp_path):
    (tmp_path / "credentials.json").write_text('{"access_key": "A", "secret_key": "S"}')
    out = run("credentials", "--data", str(tmp_path), "--region", "eu-west-3")
    assert out.returncode == 0, out.stderr
    assert "export AWS_DEFAULT_REGION=eu-west-3\n" in out.stdout
    # A serving flag is not the credentials command's.
    out = run("credentials", "--data", str(tmp_path), "--workers", "2")
    assert out.returncode == 2 and "unrecognized arguments: --workers" in out.stderr


def test_a_start_on_a_tier_the_blobs_left_is_refused(tmp_path) -> None:
    import argparse
    import dataclasses

    from gateway import config, tiers

    parser = argparse.ArgumentParser()
    config.add_options(parser)
    folder = config.settings_from(parser.parse_args(["--data", str(tmp_path)]), env={})
    below = dataclasses.replace(folder, blobs="s3://tier/p")
    tiers.check_moved(folder)  # no marker: as before, any tier
    tiers.check_moved(below)
    (tmp_path / tiers.MARKER).write_text("s3://tier/p\n")
    tiers.check_moved(below)
    assert tiers.blob_store(below) is not None
    with pytest.raises(config.StartError, match="start with --blobs/S3GW_BLOBS s3://tier/p, not"):
        tiers.blob_store(folder)
    (tmp_path / tiers.MARKER).write_text("folder\n")
    assert tiers.blob_store(folder) is None
    with pytest.raises(config.StartError, match=r"S3GW_BLOBS unset, not s3://tier/p$"):
        tiers.check_moved(below)
