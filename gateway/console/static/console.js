// The console's only script: uploads with progress (whole files, or multipart in 8 MiB
// parts through the console's own endpoints), and selecting a share link.
"use strict";

const PART_SIZE = 8 * 1024 * 1024;

function csrfToken() {
  return document.querySelector('meta[name="csrf"]').content;
}

function apiUrl(path, params) {
  return path + "?" + new URLSearchParams(params).toString();
}

// One request through XMLHttpRequest (fetch reports no upload progress); resolves with the
// JSON answer, rejects with the console's error message.
function send(method, url, body, type, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(method, url);
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    if (type) xhr.setRequestHeader("Content-Type", type);
    if (onProgress) xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      let answer = {};
      try { answer = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(answer);
      else reject(new Error(answer.error || `HTTP ${xhr.status}`));
    };
    xhr.onerror = () => reject(new Error("the connection failed"));
    xhr.send(body);
  });
}

async function uploadFile(bucket, key, file, progress) {
  const type = file.type || "application/octet-stream";
  const where = {bucket: bucket, key: key};
  if (file.size <= PART_SIZE) {
    return send("PUT", apiUrl("/api/object", where), file, type, progress);
  }
  const created = await send("POST", apiUrl("/api/uploads", where), null, type);
  const upload = Object.assign({upload_id: created.upload_id}, where);
  const parts = [];
  try {
    for (let start = 0, n = 1; start < file.size; start += PART_SIZE, n += 1) {
      const part = await send(
        "PUT", apiUrl("/api/part", Object.assign({part: n}, upload)),
        file.slice(start, start + PART_SIZE), "application/octet-stream",
        (loaded) => progress(start + loaded),
      );
      parts.push([part.part, part.etag]);
    }
    return await send("POST", apiUrl("/api/complete", upload),
                      JSON.stringify({parts: parts}), "application/json");
  } catch (error) {
    send("POST", apiUrl("/api/abort", upload)).catch(() => {});
    throw error;
  }
}

function setUp() {
  const form = document.getElementById("upload");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const list = document.getElementById("progress");
      const files = Array.from(form.elements.files.files);
      for (const file of files) {
        const item = document.createElement("li");
        const bar = document.createElement("progress");
        const state = document.createElement("span");
        bar.max = file.size || 1;
        bar.value = 0;
        item.dataset.events = "0";
        item.append(file.name + " ", bar, " ", state);
        state.textContent = "uploading…";
        list.append(item);
        try {
          await uploadFile(form.dataset.bucket, form.dataset.prefix + file.name, file, (n) => {
            bar.value = n;
            item.dataset.events = String(Number(item.dataset.events) + 1);
          });
          bar.value = bar.max;
          state.textContent = "done";
          item.className = "done";
        } catch (error) {
          state.textContent = "failed: " + error.message;
          item.className = "failed";
          item.setAttribute("role", "alert");
        }
      }
      const refresh = document.createElement("li");
      refresh.innerHTML = '<a href="">Show the list again</a>';
      list.append(refresh);
    });
  }
  const link = document.getElementById("share-link");
  if (link) {
    link.addEventListener("focus", () => link.select());
    link.focus();
  }
}

document.addEventListener("DOMContentLoaded", setUp);
