"""A real browser against the gateway: headless Chromium (Debian's `chromium` and
`chromium-driver`) opens a page served from another origin (a second local server on another
port), which

- submits an HTML form to a presigned POST (the file picked into an `<input type=file>`),
  and is redirected back by `success_action_redirect`;
- posts a form with `fetch` and reads the 201 PostResponse;
- PUTs a file with `fetch` to a presigned URL (a method and a Content-Type that need a CORS
  preflight), and reads it back with `fetch`, with the ETag the bucket's CORS rule exposes;
- and is refused by the browser itself when the bucket has no CORS rule for it.

The test asserts what the page reports and what the gateway stored. Where the browser cannot
run it skips, saying why, except under CI=1, where it fails.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.webdriver import Browser, browser_for_test

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>s3gw browser test</title></head><body>
<form id="form" method="post" enctype="multipart/form-data"></form>
<script>
const CONFIG = %s;

async function exercise() {
  const out = {};
  // A form posted by fetch: multipart/form-data needs no preflight, but its answer is
  // readable only with the CORS headers.
  const data = new FormData();
  for (const [name, value] of Object.entries(CONFIG.fetched.fields)) data.append(name, value);
  data.append("file", new Blob([CONFIG.fetched.content], {type: "text/plain"}), "fetched.txt");
  let reply = await fetch(CONFIG.fetched.url, {method: "POST", body: data});
  out.post_status = reply.status;
  out.post_body = await reply.text();
  out.post_etag = reply.headers.get("ETag");

  // PUT and a Content-Type outside the CORS-safelisted ones: the browser asks first.
  reply = await fetch(CONFIG.put_url, {
    method: "PUT", body: CONFIG.put_content, headers: {"Content-Type": "text/x-browser"},
  });
  out.put_status = reply.status;
  out.put_etag = reply.headers.get("ETag");

  reply = await fetch(CONFIG.get_url);
  out.get_status = reply.status;
  out.get_body = await reply.text();
  out.get_etag = reply.headers.get("ETag");  // readable only because the rule exposes it
  out.get_type = reply.headers.get("Content-Type");
  out.get_hidden = reply.headers.get("x-amz-request-id");  // not exposed: null

  // A bucket without a rule for this origin: the browser refuses to hand over the answer.
  try {
    await fetch(CONFIG.blocked_url, {method: "PUT", body: "no"});
    out.blocked = "not blocked";
  } catch (error) {
    out.blocked = error.name;
  }
  return out;
}

function submitForm() {
  const form = document.getElementById("form");
  form.action = CONFIG.form.url;
  for (const [name, value] of Object.entries(CONFIG.form.fields)) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
  }
  // The file last, as S3 requires: picked as a user would pick it.
  const input = document.createElement("input");
  input.type = "file";
  input.name = "file";
  const picked = new DataTransfer();
  picked.items.add(new File([CONFIG.form.content], "picked.txt", {type: "text/plain"}));
  input.files = picked.files;
  form.appendChild(input);
  form.submit();
}
</script></body></html>
"""


class _Pages(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        body = self.page if self.path == "/" else b"<!doctype html><title>done</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = browser_for_test()
    yield opened
    opened.close()


def test_browser_uploads_and_reads_across_origins(gateway, s3, bucket, page_server, browser):
    page_origin = f"http://127.0.0.1:{page_server.server_address[1]}"
    assert page_origin != gateway.url  # another port: another origin
    s3.put_bucket_cors(
        Bucket=bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": [page_origin],
                    "AllowedMethods": ["GET", "PUT", "POST"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                    "MaxAgeSeconds": 60,
                }
            ]
        },
    )
    uncors = bucket + "-no-cors"
    s3.create_bucket(Bucket=uncors)
    signer = gateway.client(signature_version="s3v4")
    done = f"{page_origin}/done"
    form = signer.generate_presigned_post(
        bucket,
        "form/${filename}",
        Fields={"success_action_redirect": done, "Content-Type": "text/plain"},
        Conditions=[
            ["starts-with", "$key", "form/"],
            {"success_action_redirect": done},
            {"Content-Type": "text/plain"},
            ["content-length-range", 1, 1024],
        ],
        ExpiresIn=600,
    )
    fetched = signer.generate_presigned_post(
        bucket,
        "fetched.txt",
        Fields={"success_action_status": "201"},
        Conditions=[{"success_action_status": "201"}],
        ExpiresIn=600,
    )
    config = {
        "form": {"url": form["url"], "fields": form["fields"], "content": "from a form"},
        "fetched": {"url": fetched["url"], "fields": fetched["fields"], "content": "by fetch"},
        "put_url": signer.generate_presigned_url(
            "put_object", Params={"Bucket": bucket, "Key": "put.txt"}, ExpiresIn=600
        ),
        "put_content": "put by the browser",
        "get_url": signer.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": "put.txt"}, ExpiresIn=600
        ),
        "blocked_url": signer.generate_presigned_url(
            "put_object", Params={"Bucket": uncors, "Key": "no.txt"}, ExpiresIn=600
        ),
    }
    _Pages.page = (PAGE % json.dumps(config)).encode()
    browser.get(page_origin + "/")

    out = browser.run_async(
        "const done = arguments[arguments.length - 1];"
        "exercise().then(done, (e) => done({error: String(e)}));"
    )
    assert "error" not in out, out
    md5 = {text: f'"{hashlib.md5(text.encode()).hexdigest()}"' for text in config_texts(config)}

    assert out["post_status"] == 201
    assert "<Key>fetched.txt</Key>" in out["post_body"]
    assert out["post_etag"] == md5["by fetch"]
    assert out["put_status"] == 200
    assert out["put_etag"] == md5["put by the browser"]
    assert out["get_status"] == 200
    assert out["get_body"] == "put by the browser"
    assert out["get_etag"] == md5["put by the browser"]
    assert out["get_type"] == "text/x-browser"
    assert out["get_hidden"] is None
    assert out["blocked"] == "TypeError"

    browser.run("submitForm();")
    landed = urlsplit(browser.wait_for_url(done))
    query = {k: v[0] for k, v in parse_qs(landed.query).items()}
    assert query == {"bucket": bucket, "key": "form/picked.txt", "etag": md5["from a form"]}

    # What the gateway stored.
    stored = s3.get_object(Bucket=bucket, Key="form/picked.txt")
    assert stored["Body"].read() == b"from a form"
    assert stored["ContentType"] == "text/plain"
    assert stored["ETag"] == md5["from a form"]
    assert s3.get_object(Bucket=bucket, Key="fetched.txt")["Body"].read() == b"by fetch"
    put = s3.get_object(Bucket=bucket, Key="put.txt")
    assert (put["Body"].read(), put["ContentType"]) == (b"put by the browser", "text/x-browser")
    assert s3.list_objects_v2(Bucket=uncors)["KeyCount"] == 0


def config_texts(config: dict) -> list[str]:
    return [config["form"]["content"], config["fetched"]["content"], config["put_content"]]
