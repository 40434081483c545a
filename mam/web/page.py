"""The page itself: one HTML document, its style and its script, served as they are (no build step, no CDN).

The same bytes for every visitor: no data and no secret is in them. Opened from a login link
(`/login#code=CODE`), the script trades the code for a login (POST /login: a cookie, and the login's
secret, which it keeps in `sessionStorage`) and drops the code from the address bar and the history.
It then sends the secret in `X-Mam-Login` with every request: the event stream is read with fetch
(EventSource cannot send a header), and re-opened with a back-off when it drops. It draws what the
`state` events say with textContent only, so no agent text is ever read as HTML; it draws a button
for each action a row offers and asks the action's question first.
"""

from __future__ import annotations

HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mam</title>
<link rel="stylesheet" href="/app.css">
</head>
<body>
<header><span id="head">mam: connecting…</span><span id="hold"></span><span id="live" class="pill">…</span></header>
<div id="offline" class="banner" hidden>The page lost the server; retrying…</div>
<div id="broker" class="banner" hidden>The broker is unreachable: reading the registry instead
(changes may lag a second).</div>
<div id="toast" class="toast" hidden></div>
<main>
<section><h2>Sessions <small id="n-sessions"></small></h2>
<table id="sessions"><thead><tr><th></th><th>session</th><th>agent</th><th>role</th><th>state</th><th>from</th>
<th>job</th><th>last</th><th></th></tr></thead><tbody></tbody></table></section>
<section><h2>Open jobs <small id="n-jobs"></small></h2>
<table id="jobs"><thead><tr><th>job</th><th>session</th><th>state</th><th>age</th><th>quiet</th><th>deadlines</th>
<th>message</th><th></th></tr></thead><tbody></tbody></table></section>
<section><h2>Loops <small id="n-loops"></small></h2>
<table id="loops"><thead><tr><th>loop</th><th>state</th><th>round</th><th>creator</th><th>verdicts</th></tr></thead>
<tbody></tbody></table></section>
<section><h2>Tasks <small id="n-tasks"></small></h2>
<table id="tasks"><thead><tr><th>task</th><th>state</th><th>role</th><th>job</th><th>title</th></tr></thead>
<tbody></tbody></table></section>
<section><h2>Roles <small id="n-roles"></small></h2>
<table id="roles"><thead><tr><th>role</th><th>session</th><th>reports to</th><th>runs today</th><th>breaker</th></tr>
</thead><tbody></tbody></table></section>
<section><h2>Activity</h2><ol id="lines"></ol></section>
</main>
<dialog id="screen"><header><b id="screen-name"></b> <button id="screen-refresh">refresh</button>
<button id="screen-close">close</button></header><pre id="screen-text"></pre></dialog>
<script src="/app.js"></script>
</body>
</html>
"""

STYLE = """
:root { color-scheme: light dark; --fg:#1d1f21; --bg:#fafafa; --mute:#777; --line:#ddd; --bar:#e3e3e3; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6e6e6; --bg:#16181a; --mute:#999; --line:#333; --bar:#333; } }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.4 system-ui, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:.5em; align-items:center; justify-content:space-between; padding:.5em .8em;
  border-bottom:1px solid var(--line); font-family: ui-monospace, monospace; font-size:12px; }
main { padding: 0 .8em 2em; }
h2 { font-size: 15px; margin: 1.2em 0 .4em; } small { color:var(--mute); font-weight:normal; }
table { border-collapse: collapse; width:100%; }
th { text-align:left; color:var(--mute); font-weight:normal; font-size:12px; border-bottom:1px solid var(--line); }
td, th { padding:.3em .4em; vertical-align:top; }
tr + tr td { border-top:1px solid var(--line); }
td.mono, .mono { font-family: ui-monospace, monospace; font-size:12px; word-break: break-all; }
.dot { font-size:16px; }
.working { color:#2a9d3a; } .waiting { color:#c89500; font-weight:bold; } .idle { color:#1f8fb3; }
.starting { color:#3b6fd8; } .stopped { color:#888; } .terminated { color:#d33; }
td.title { white-space: pre; } tr.tripped td { color:#d33; font-weight:bold; }
.bars { min-width: 9em; } .bar { display:flex; align-items:center; gap:.3em; font-size:11px; color:var(--mute); }
.bar span.track { flex:1; height:6px; background:var(--bar); border-radius:3px; overflow:hidden; min-width:4em; }
.bar span.fill { display:block; height:100%; background:#2a9d3a; }
.bar.late span.fill { background:#d33; } .bar.near span.fill { background:#c89500; }
button { font:inherit; padding:.35em .8em; border-radius:6px; border:1px solid var(--line); background:transparent;
  color:inherit; cursor:pointer; min-height:2.2em; }
button.danger { border-color:#d33; color:#d33; }
.banner { padding:.5em .8em; background:#c89500; color:#000; }
.toast { position:fixed; bottom:1em; left:1em; right:1em; padding:.6em .8em; background:#333; color:#fff;
  border-radius:6px; max-width:40em; }
.pill { padding:0 .5em; border-radius:1em; border:1px solid var(--line); }
#lines { font-family: ui-monospace, monospace; font-size:12px; padding-left:1.5em; margin:0; }
#lines li { white-space: pre-wrap; word-break: break-word; }
dialog { width: min(100em, 96vw); max-height: 90vh; padding:0; border:1px solid var(--line);
  background:var(--bg); color:var(--fg); }
dialog header { position:sticky; top:0; background:var(--bg); }
dialog pre { margin:0; padding:.6em; font-size:12px; overflow:auto; max-height: 80vh; }
@media (max-width: 700px) {
  /* a row becomes a card: its cells wrap like words; the id, the bars and the message take a line each */
  thead { display:none; }
  table, tbody { display:block; width:100%; }
  tr { display:flex; flex-wrap:wrap; align-items:baseline; gap:.15em .9em; padding:.5em 0;
    border-top:1px solid var(--line); }
  tr + tr td { border-top:none; }
  td { display:block; padding:0; } td:empty { display:none; }
  td.name { font-weight:bold; font-size:14px; } td.id, td.bars, td.message { flex-basis:100%; }
  td[data-label]::before { content: attr(data-label) " "; color:var(--mute); font-size:11px; }
  td:last-child { margin-left:auto; }
}
"""

SCRIPT = r"""
"use strict";
const $ = (sel) => document.querySelector(sel);
const LINES_KEPT = 50;
const LOGIN = "mam-login";  // sessionStorage: kept per tab and per origin (port included), unlike a cookie
let secret = sessionStorage.getItem(LOGIN);
let refusedAlready = false;

function api(path, options = {}) {
  const headers = { ...(options.headers || {}), "X-Mam-Login": secret || "" };
  return fetch(path, { ...options, headers, credentials: "same-origin", cache: "no-store" });
}

function refused(text) {
  refusedAlready = true;
  sessionStorage.removeItem(LOGIN);
  $("#offline").textContent = text || "The server refused this page: open a new link (`mam web` prints one).";
  $("#offline").hidden = false;
  $("#live").textContent = "logged out";
}

async function login() {
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  history.replaceState(null, "", "/");  // the code leaves the address bar and this history entry
  if (!code) { refused("This link holds no login code: open the one `mam web` printed."); return false; }
  const r = await fetch("/login", {
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
  });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok || !answer.secret) { refused(`The server refused this link: ${answer.error || r.status}`); return false; }
  secret = answer.secret;
  sessionStorage.setItem(LOGIN, secret);
  return true;
}

function cell(text, cls, label) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  if (label) td.dataset.label = label;
  return td;
}

function toast(text) {
  const t = $("#toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
}

function actionButtons(subject, id, actions) {
  const td = document.createElement("td");
  for (const a of actions || []) {
    const b = document.createElement("button");
    b.textContent = a.label;
    b.className = "danger";
    b.dataset.action = a.name;
    b.addEventListener("click", () => act(subject, id, a));
    td.appendChild(b);
  }
  return td;
}

async function act(subject, id, action) {
  let body = action.body || {};
  if (action.note) {  // the question takes a typed answer (a loop's rejection note)
    const note = window.prompt(action.question, "");
    if (!note || !note.trim()) return;
    body = { ...body, note };
  } else if (!window.confirm(action.question)) return;
  try {
    const r = await api(`/api/${subject}/${encodeURIComponent(id)}/${action.name}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    if (r.status === 401) { refused(); return; }
    const answer = await r.json();
    toast(r.ok ? `${subject} ${id}: ${action.name}: done` : `${subject} ${id}: ${answer.error || r.status}`);
  } catch (e) {
    toast(`${subject} ${id}: ${e}`);
  }
}

function bar(b) {
  const div = document.createElement("div");
  div.className = "bar";
  div.dataset.bar = b.label;
  if (b.fraction == null) { div.hidden = true; return div; }
  if (b.fraction >= 1) div.classList.add("late"); else if (b.fraction >= 0.75) div.classList.add("near");
  const name = document.createElement("span");
  name.textContent = b.label;
  const track = document.createElement("span");
  track.className = "track";
  const fill = document.createElement("span");
  fill.className = "fill";
  fill.style.width = `${Math.max(0, Math.min(1, b.fraction)) * 100}%`;
  track.appendChild(fill);
  const pct = document.createElement("span");
  pct.textContent = `${Math.round(Math.min(b.fraction, 9.99) * 100)}%`;
  div.append(name, track, pct);
  return div;
}

function fill(id, rows) {
  const body = $(`#${id} tbody`);
  body.replaceChildren(...rows);
  $(`#n-${id}`).textContent = `(${rows.length})`;
}

function render(s) {
  $("#head").textContent = s.header.replace(/^mam top/, "mam web");
  $("#broker").hidden = s.broker !== "down";
  $("#live").textContent = s.broker === "up" ? "live" : s.broker === "down" ? "broker down" : "…";
  $("#hold").replaceChildren(...actionButtons("workspace", "all", s.workspace_actions).childNodes);
  fill("sessions", s.sessions.map((x) => {
    const tr = document.createElement("tr");
    tr.dataset.session = x.name;
    tr.dataset.state = x.state;
    tr.append(cell(x.dot, `dot ${x.state}`), cell(x.name, "name mono"), cell(x.agent, "agent", "agent"),
      cell(x.role, "role", "role"),
      cell(x.waiting_tool ? `${x.state}: ${x.waiting_tool}` : x.state, `state ${x.state}`, "state"),
      cell(x.source, "source", "from"), cell(x.job || "-", "job mono", "job"), cell(x.last, "last", "last"));
    const td = actionButtons("session", x.name, x.actions);  // allow once / deny a permission prompt
    const b = document.createElement("button");
    b.textContent = "Screen";
    b.dataset.action = "screen";
    b.addEventListener("click", () => openScreen(x.name));
    td.appendChild(b);
    tr.appendChild(td);
    return tr;
  }));
  fill("jobs", s.jobs.map((j) => {
    const tr = document.createElement("tr");
    tr.dataset.job = j.id;
    tr.dataset.state = j.state;
    const bars = document.createElement("td");
    bars.className = "bars";
    bars.append(...j.bars.map(bar));
    tr.append(cell(j.id, "id mono"), cell(j.session, "session", "session"), cell(j.cells.STATE, "state", "state"),
      cell(j.cells.AGE, "age", "age"), cell(j.cells.QUIET, "quiet", "quiet"), bars,
      cell(j.cells.MESSAGE, "message"), actionButtons("job", j.id, j.actions));
    return tr;
  }));
  fill("loops", s.loops.map((l) => {
    const tr = document.createElement("tr");
    tr.dataset.loop = l.id;
    tr.append(cell(l.id, "id mono"), cell(l.state, "state", "state"), cell(l.rounds, "round", "round"),
      cell(l.creator || "-", "creator", "creator"),
      cell(l.verdicts.map((v) => `${v.reviewer}: ${v.verdict}`).join(", ") || "-", "verdicts", "verdicts"));
    return tr;
  }));
  fill("tasks", (s.tasks || []).map((t) => {  // the tree by parent: a subtask indented under its parent
    const tr = document.createElement("tr");
    tr.dataset.task = t.id;
    tr.dataset.state = t.state;
    tr.dataset.depth = t.depth;
    tr.append(cell(t.id, "id mono"), cell(t.cells.STATE, "state", "state"), cell(t.role, "role", "role"),
      cell(t.cells.JOB, "job mono", "job"), cell(t.cells.TITLE, "title"));
    return tr;
  }));
  fill("roles", (s.roles || []).map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.role = r.name;
    if (r.tripped) tr.className = "tripped";
    tr.append(cell(r.name, "name mono"), cell(r.session, "session", "session"),
      cell(r.cells["REPORTS TO"], "reports", "reports to"), cell(r.cells["RUNS TODAY"], "runs", "runs today"),
      cell(r.cells.BREAKER, "breaker", "breaker"));
    return tr;
  }));
}

function addLine(text) {
  const li = document.createElement("li");
  li.textContent = text;
  const list = $("#lines");
  list.prepend(li);
  while (list.children.length > LINES_KEPT) list.lastChild.remove();
}

function lineText(l) {
  const clock = l.ts.slice(11, 19);
  const what = l.kind === "transition" ? `-> ${l.type}` : l.kind === "loop" ? `loop ${l.type}`
    : l.kind === "task" ? `task ${l.type}` : l.type;
  return `${clock} ${l.session || "-"} ${l.job || l.loop} ${what} #${l.seq} ${l.message}`.trimEnd();
}

async function openScreen(name) {
  const dlg = $("#screen");
  $("#screen-name").textContent = name;
  $("#screen-text").textContent = "reading…";
  dlg.dataset.session = name;
  if (!dlg.open) dlg.showModal();
  try {
    const r = await api(`/api/sessions/${encodeURIComponent(name)}/screen`);
    if (r.status === 401) { refused(); return; }
    const body = await r.json();
    $("#screen-text").textContent = r.ok ? body.screen : body.error;
  } catch (e) {
    $("#screen-text").textContent = String(e);
  }
}
$("#screen-close").addEventListener("click", () => $("#screen").close());
$("#screen-refresh").addEventListener("click", () => openScreen($("#screen").dataset.session));

function onEvent(block) {  // one server-sent event: `event: KIND` and `data: JSON` lines
  let kind = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) kind = line.slice(7);
    else if (line.startsWith("data: ")) data.push(line.slice(6));
  }
  if (!data.length) return;  // a keep-alive comment
  const value = JSON.parse(data.join("\n"));
  if (kind === "state") render(value);
  else if (kind === "line") addLine(lineText(value));
  else if (kind === "note") addLine(`mam: ${value.message}`);
}

async function follow() {  // the event stream, read with fetch so that it carries the login's secret
  let wait = 1000;
  while (!refusedAlready) {
    try {
      const r = await api("/api/events");
      if (r.status === 401) { refused(); return; }
      if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
      $("#offline").hidden = true;
      wait = 1000;
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          onEvent(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (e) { /* the server went away: retried below */ }
    if (refusedAlready) return;
    $("#offline").textContent = "The page lost the server; retrying…";
    $("#offline").hidden = false;
    $("#live").textContent = "offline";
    await new Promise((done) => setTimeout(done, wait));
    wait = Math.min(wait * 2, 10000);
  }
}

(async () => {
  if (location.pathname === "/login" && !(await login())) return;
  if (!secret) { refused("This tab has no login: open a new link (`mam web` prints one)."); return; }
  follow();
})();
"""
