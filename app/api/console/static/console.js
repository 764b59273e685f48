"use strict";
/*
 * The halfmq console: fills the server-rendered pages from the broker's HTTP API.
 *
 * Every figure comes from the same /v1 routes every client uses (and /metrics), called
 * from this browser with the operator's bearer token when the broker asks for one. A
 * route the broker does not serve (404 NOT_FOUND or 405 METHOD_NOT_ALLOWED: an older
 * broker) is shown as "not offered", never as a broken page. Data is put into the page
 * as text nodes only, so nothing a message or a name holds can run as script.
 */

const TOKEN_KEY = "halfmq.console.token";
const UNFINISHED = ["OPEN", "PREPARE_COMMIT", "PREPARE_ABORT"];
const HALF_STATES = ["PREPARED", "DISCARDED", "COMMITTED", "ROLLED_BACK"];
// How far the overview counts half messages of each state: exactly where an operator may have
// to act, roughly for the history (a count is a listing, and long listings are slow to send).
const HALF_COUNT_LIMITS = { PREPARED: 1000, DISCARDED: 1000, COMMITTED: 100, ROLLED_BACK: 100 };
const REFRESH_MS = 5000;

/* ---------- the API ---------- */

class ApiError extends Error {
  constructor(status, code, message, method, path) {
    super(message);
    this.status = status;
    this.code = code;
    this.method = method;
    this.path = path;
  }

  /* The broker serves no such route: it is older than this console, or built without the feature. */
  get notOffered() {
    return this.code === "NOT_FOUND" || this.code === "METHOD_NOT_ALLOWED";
  }
}

async function api(method, path, { params, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (failure) {
    throw new ApiError(0, "BROKER_UNREACHABLE", `the broker did not answer (${failure.message})`, method, path);
  }
  const text = await response.text();
  const isJson = (response.headers.get("content-type") || "").includes("json");
  let answer = text;
  if (isJson && text) {
    try {
      answer = JSON.parse(text);
    } catch {
      answer = text;
    }
  }
  if (response.ok) return answer;
  const error = answer && answer.error ? answer.error : { code: `HTTP_${response.status}`, message: text.slice(0, 200) };
  const failure = new ApiError(response.status, error.code, error.message, method, path);
  if (response.status === 401) askForToken(failure);
  throw failure;
}

const enc = encodeURIComponent;

/* ---------- building the page ---------- */

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function $(selector) {
  return document.querySelector(selector);
}

function slot(name) {
  return document.querySelector(`[data-slot="${name}"]`);
}

function fill(target, ...children) {
  const node = typeof target === "string" ? slot(target) : target;
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

/* columns: [{title, cell(row), num?}]; rowAttrs(row) gives a row's attributes. */
function table(columns, rows, { empty = "Nothing here.", rowAttrs, caption } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
      h(
        "tbody",
        {},
        rows.map((row) =>
          h("tr", rowAttrs ? rowAttrs(row) : {}, columns.map((c) => h("td", { class: c.num ? "num" : c.cls }, c.cell(row))))
        )
      )
    )
  );
}

function fields(pairs) {
  return h(
    "dl",
    { class: "fields" },
    pairs.filter(Boolean).map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)])
  );
}

/* What went wrong, said plainly: not offered, not allowed, or the broker's own code and message. */
function problem(error, what) {
  if (error instanceof ApiError && error.notOffered) {
    return h(
      "div",
      { class: "notice not-offered" },
      h("strong", {}, "Not offered by this broker. "),
      `${what}: ${error.method} ${error.path.split("?")[0]} answered ${error.status} ${error.code}. A broker with this feature serves it.`
    );
  }
  if (error instanceof ApiError && error.status === 401) {
    return h("div", { class: "notice" }, "Sign in with a token to see this.");
  }
  if (error instanceof ApiError && error.status === 403) {
    return h("div", { class: "error" }, `Your token may not see this. ${error.code}: ${error.message}`);
  }
  if (error instanceof ApiError) return h("div", { class: "error" }, `${error.code}: ${error.message}`);
  return h("div", { class: "error" }, `The console failed: ${error && error.message ? error.message : error}`);
}

/* Fill a slot with what `work` builds, or with what went wrong. */
async function load(target, what, work) {
  const node = typeof target === "string" ? slot(target) : target;
  node.setAttribute("aria-busy", "true");
  try {
    fill(node, await work());
  } catch (error) {
    fill(node, problem(error, what));
  } finally {
    node.removeAttribute("aria-busy");
  }
}

function toast(text, kind = "ok") {
  const note = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
  $("#toasts").append(note);
  setTimeout(() => note.remove(), kind === "error" ? 10000 : 6000);
}

function confirmAction(title, text, label) {
  const dialog = $("#confirm-dialog");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = label;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

/* Run an action button's call: a toast says what the broker answered, then `after` refreshes. */
async function act(button, call, describe, after) {
  button.disabled = true;
  try {
    const answer = await call();
    toast(describe(answer));
  } catch (error) {
    let text = String(error);
    if (error instanceof ApiError && error.notOffered) text = `Not offered by this broker: ${error.method} ${error.path} answered ${error.status} ${error.code}.`;
    else if (error instanceof ApiError) text = `${error.code}: ${error.message}`;
    toast(text, "error");
  } finally {
    button.disabled = false;
  }
  await after();
}

/* ---------- how figures read ---------- */

function span(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  let seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  let minutes = Math.floor(seconds / 60);
  seconds %= 60;
  if (minutes < 60) return `${minutes}m ${String(seconds).padStart(2, "0")}s`;
  let hours = Math.floor(minutes / 60);
  minutes %= 60;
  if (hours < 48) return `${hours}h ${String(minutes).padStart(2, "0")}m`;
  const days = Math.floor(hours / 24);
  hours %= 24;
  return `${days}d ${hours}h`;
}

function ago(at) {
  return at === null || at === undefined ? "–" : `${span(Math.max(0, Date.now() - at))} ago`;
}

function clock(at) {
  if (at === null || at === undefined) return "–";
  const d = new Date(at);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function when(at) {
  return h("time", { class: "nowrap", datetime: at ? new Date(at).toISOString() : null, title: clock(at) }, ago(at));
}

function number(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

function bytes(n) {
  if (n === null || n === undefined || n < 0) return "no limit";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function badge(state) {
  return h("span", { class: `badge state-${String(state).toLowerCase().replace(/_/g, "-")}` }, state);
}

function ident(text) {
  return h("code", { class: "ident" }, text);
}

/* A long id in a list: its start, the whole of it on hover and in the detail. */
function shortIdent(text) {
  return text.length <= 14 ? ident(text) : h("code", { class: "ident", title: text }, `${text.slice(0, 12)}…`);
}

function partitionList(partitions) {
  if (!partitions || !partitions.length) return "–";
  return partitions.map((p) => `${p.topic}-${p.partition}`).join(", ");
}

function pageLink(page, params, text) {
  const query = new URLSearchParams(params).toString();
  return h("a", { href: `/console/${page}${query ? `?${query}` : ""}` }, text);
}

function queryParam(name) {
  return new URLSearchParams(location.search).get(name);
}

function setQuery(params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  history.replaceState(null, "", query ? `?${query}` : location.pathname);
}

/* ---------- signing in ---------- */

let askingForToken = false;

function askForToken(failure) {
  if (askingForToken) return;
  askingForToken = true;
  const message = $("#login-error");
  if (sessionStorage.getItem(TOKEN_KEY)) {
    sessionStorage.removeItem(TOKEN_KEY);
    message.textContent = `The broker refused that token: ${failure.code}: ${failure.message}`;
    message.hidden = false;
  }
  $("#login-dialog").showModal();
}

function setUpSession() {
  const signedIn = Boolean(sessionStorage.getItem(TOKEN_KEY));
  $("#session-state").textContent = signedIn ? "signed in with a token" : "";
  $("#sign-out").hidden = !signedIn;
  $("#sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  $("#login-form").addEventListener("submit", () => {
    const token = $("#login-token").value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    location.reload();
  });
}

/* ---------- overview ---------- */

function parseMessageCounters(text) {
  const totals = { in: {}, out: {} };
  for (const line of text.split("\n")) {
    // With several fronts (HALFMQ_WORKERS) each front's series carries a front label: add them up.
    const match = /^halfmq_messages_(in|out)_total\{topic="([^"]*)"(?:,front="[^"]*")?\} ([0-9.eE+-]+)$/.exec(line);
    if (match) totals[match[1]][match[2]] = (totals[match[1]][match[2]] || 0) + Number(match[3]);
  }
  return totals;
}

function sum(values) {
  return Object.values(values).reduce((a, b) => a + b, 0);
}

function overviewPage() {
  let previous = null; // the last /metrics sample: {at, totals}
  let timer = null;

  async function figure(name, work) {
    const node = document.querySelector(`[data-figure="${name}"]`);
    try {
      node.replaceChildren(await work());
    } catch (error) {
      node.replaceChildren(error instanceof ApiError && error.notOffered ? "not offered" : "–");
      if (!(error instanceof ApiError && error.notOffered)) node.title = error.message;
    }
  }

  async function rates() {
    const text = await api("GET", "/metrics");
    const sample = { at: Date.now(), totals: parseMessageCounters(text) };
    const last = previous;
    previous = sample;
    const rate = (now, before) => (last ? Math.max(0, (now - before) / ((sample.at - last.at) / 1000)) : null);
    const shown = (value) => (value === null ? "measuring…" : `${value.toFixed(1)} msg/s`);
    const topics = new Set([...Object.keys(sample.totals.in), ...Object.keys(sample.totals.out)]);
    const rows = [...topics].map((topic) => ({
      topic,
      in: sample.totals.in[topic] || 0,
      out: sample.totals.out[topic] || 0,
      inRate: rate(sample.totals.in[topic] || 0, last ? last.totals.in[topic] || 0 : 0),
      outRate: rate(sample.totals.out[topic] || 0, last ? last.totals.out[topic] || 0 : 0),
    }));
    rows.sort((a, b) => (b.inRate || 0) - (a.inRate || 0) || b.in - a.in);
    const totalIn = sum(sample.totals.in);
    const totalOut = sum(sample.totals.out);
    document.querySelector('[data-figure="rate-in"]').textContent = shown(rate(totalIn, last ? sum(last.totals.in) : 0));
    document.querySelector('[data-figure="rate-out"]').textContent = shown(rate(totalOut, last ? sum(last.totals.out) : 0));
    document.querySelector('[data-figure="total-in"]').textContent = `${number(totalIn)} since this broker process started`;
    document.querySelector('[data-figure="total-out"]').textContent = `${number(totalOut)} since this broker process started`;
    return table(
      [
        { title: "Topic", cell: (r) => pageLink("topics", { topic: r.topic }, r.topic) },
        { title: "In", num: true, cell: (r) => shown(r.inRate) },
        { title: "Out", num: true, cell: (r) => shown(r.outRate) },
        { title: "Appended", num: true, cell: (r) => number(r.in) },
        { title: "Fetched", num: true, cell: (r) => number(r.out) },
      ],
      rows,
      { empty: "No messages produced or fetched since this broker process started." }
    );
  }

  async function halfStates() {
    const counts = await Promise.all(
      HALF_STATES.map((state) => api("GET", "/v1/half-messages", { params: { state, limit: HALF_COUNT_LIMITS[state] } }))
    );
    const prepared = counts[0].half_messages;
    const oldest = prepared.reduce((min, m) => Math.min(min, m.born_timestamp), Infinity);
    return [
      h(
        "ul",
        { class: "state-counts" },
        HALF_STATES.map((state, i) => {
          const n = counts[i].half_messages.length;
          return h(
            "li",
            {},
            pageLink("half-messages", { state }, [badge(state), h("span", { class: "count" }, n >= HALF_COUNT_LIMITS[state] ? `${number(n)}+` : number(n))])
          );
        })
      ),
      prepared.length ? h("p", { class: "muted" }, "Oldest prepared: ", when(oldest), ".") : null,
    ];
  }

  async function checker() {
    const status = await api("GET", "/v1/checker");
    const now = Date.now();
    const lease = status.lease_expires_ms;
    return [
      fields([
        ["Leader", status.leader ? ident(status.leader) : h("span", { class: "warn-text" }, "none: no broker process holds the checker lease")],
        ["Lease", lease ? (lease > now ? `expires in ${span(lease - now)}` : h("span", { class: "warn-text" }, `expired ${span(now - lease)} ago`)) : "–"],
        ["Last round", status.last_round_ms ? when(status.last_round_ms) : "none yet"],
        status.last_retention_ms !== undefined ? ["Last retention", status.last_retention_ms ? when(status.last_retention_ms) : "none yet"] : null,
        ["Prepared", number(status.prepared)],
      ]),
      table(
        [
          { title: "Producer group", cell: (g) => pageLink("half-messages", { group: g.producer_group, state: "PREPARED" }, g.producer_group) },
          { title: "Prepared", num: true, cell: (g) => number(g.prepared) },
          { title: "Oldest", cell: (g) => (g.oldest_born_ms ? when(g.oldest_born_ms) : "–") },
          {
            title: "Live listeners",
            num: true,
            cell: (g) =>
              g.live_listeners === 0 && g.prepared > 0
                ? h("span", { class: "warn-text", title: "no producer instance answers back-checks for this group" }, "0")
                : number(g.live_listeners),
          },
        ],
        status.groups,
        { empty: "No producer group has prepared half messages." }
      ),
    ];
  }

  async function rocketmqSessions() {
    const answer = await api("GET", "/v1/rocketmq/sessions");
    const what = (s) =>
      s.topics.length
        ? s.topics.join(", ")
        : [s.group || "", ...s.subscriptions.map((sub) => `${sub.topic} (${sub.expression || "*"})`)].join(" ").trim();
    return [
      h("p", { class: "muted" }, `Listeners: ${answer.brokers.map((b) => b.advertised_address).join(", ") || "none"}`),
      table(
        [
          { title: "Client", cell: (s) => ident(s.client_id) },
          { title: "Kind", cell: (s) => s.client_type },
          { title: "Client version", cell: (s) => `${s.language} ${s.version}`.trim() },
          { title: "Principal", cell: (s) => s.principal },
          { title: "Topics / group", cell: what },
          { title: "Broker", cell: (s) => s.broker },
          { title: "Last seen", cell: (s) => when(s.last_seen_ms) },
        ],
        answer.sessions,
        { empty: "No RocketMQ client is connected." }
      ),
    ];
  }

  async function delayedMessages() {
    const answer = await api("GET", "/v1/delayed-messages", { params: { limit: 100 } });
    return table(
      [
        { title: "Message id", cell: (m) => ident(m.message_id) },
        { title: "Topic", cell: (m) => pageLink("topics", { topic: m.topic }, m.topic) },
        { title: "Partition", num: true, cell: (m) => String(m.partition) },
        { title: "Deliver at", cell: (m) => when(m.deliver_at) },
      ],
      answer.delayed_messages,
      { empty: "No delay message is waiting." }
    );
  }

  async function openTransactions() {
    const lists = await Promise.all(UNFINISHED.map((state) => api("GET", "/v1/transactions", { params: { state } })));
    const open = lists.flatMap((l) => l.transactions);
    const now = Date.now();
    const overdue = open.filter((t) => now - t.started_ms > t.timeout_ms).length;
    const note = document.querySelector('[data-figure="overdue-transactions"]');
    fill(note, overdue ? h("span", { class: "warn-text" }, `${overdue} past their timeout`) : "none past its timeout", " · ", pageLink("transactions", {}, "list"));
    return String(open.length);
  }

  async function groupLag() {
    const groups = (await api("GET", "/v1/groups")).groups;
    const behind = groups.filter((g) => g.lag > 0).sort((a, b) => b.lag - a.lag);
    const total = groups.reduce((sum, g) => sum + (g.lag || 0), 0);
    document.querySelector('[data-figure="lag"]').textContent = number(total);
    fill(
      document.querySelector('[data-figure="lagging-groups"]'),
      behind.length ? h("span", { class: "warn-text" }, `${behind.length} of ${groups.length} group(s) behind`) : `${groups.length} group(s), none behind`,
      " · ",
      pageLink("groups", {}, "list")
    );
    return table(
      [
        { title: "Group", cell: (g) => pageLink("groups", { group: g.group }, g.group) },
        { title: "State", cell: (g) => badge(g.state) },
        { title: "Members", num: true, cell: (g) => number(g.members) },
        { title: "Lag", num: true, cell: (g) => h("span", { class: "warn-text" }, number(g.lag)) },
      ],
      behind.slice(0, 10),
      { empty: groups.length ? "Every consumer group has read all that was committed." : "No consumer groups yet." }
    );
  }

  async function refresh() {
    await Promise.all([
      load("group-lag", "Consumer lag", groupLag),
      load("topic-rates", "Message rates", rates),
      figure("topics", async () => String((await api("GET", "/v1/topics")).topics.length)),
      figure("open-transactions", openTransactions),
      load("half-states", "Half messages by state", halfStates),
      load("checker", "The checker's status", checker),
      load("rocketmq-sessions", "RocketMQ clients", rocketmqSessions),
      load("delayed-messages", "Delay messages waiting", delayedMessages),
    ]);
    $("#refreshed").textContent = `refreshed ${clock(Date.now()).slice(11, 19)}`;
  }

  function schedule() {
    clearInterval(timer);
    if ($("#auto-refresh").checked) timer = setInterval(refresh, REFRESH_MS);
  }

  $("#refresh").addEventListener("click", refresh);
  $("#auto-refresh").addEventListener("change", schedule);
  refresh();
  schedule();
}

/* ---------- topics ---------- */

function topicsPage() {
  let topics = [];
  let current = null; // the described topic
  let page = null; // the last page of messages: {partition, offset, next}

  function list() {
    const wanted = $("#topic-filter").value.trim().toLowerCase();
    const shown = topics.filter((t) => t.name.toLowerCase().includes(wanted));
    return table(
      [
        {
          title: "Topic",
          cell: (t) =>
            h("a", { href: `?topic=${enc(t.name)}`, onclick: (e) => { e.preventDefault(); select(t.name); } }, t.name),
        },
        { title: "Partitions", num: true, cell: (t) => number(t.partitions) },
      ],
      shown,
      {
        empty: topics.length ? "No topic matches." : "No topics yet.",
        rowAttrs: (t) => ({ class: current && t.name === current.name ? "selected" : null, "data-topic": t.name }),
      }
    );
  }

  function describe(topic) {
    const rows = topic.partitions;
    const blocking = (p) => {
      if (p.blocking_txn_id) return pageLink("transactions", { txn: p.blocking_txn_id }, ident(p.blocking_txn_id));
      if (p.last_stable_offset < p.high_watermark) return h("span", { class: "warn-text" }, "held back by an open transaction");
      return "–";
    };
    const config = topic.config;
    return [
      h("h3", {}, topic.name),
      table(
        [
          { title: "Partition", num: true, cell: (p) => p.partition },
          { title: "Log start", num: true, cell: (p) => number(p.log_start_offset) },
          {
            title: "Last stable",
            num: true,
            cell: (p) => (p.last_stable_offset < p.high_watermark ? h("span", { class: "warn-text" }, number(p.last_stable_offset)) : number(p.last_stable_offset)),
          },
          { title: "High watermark", num: true, cell: (p) => number(p.high_watermark) },
          { title: "Offsets held", num: true, cell: (p) => number(p.high_watermark - p.log_start_offset) },
          { title: "Blocking transaction", cell: blocking },
        ],
        rows
      ),
      config
        ? fields([
            ["Retention by time", retention(config, "retention_ms", span)],
            ["Retention by size", retention(config, "retention_bytes", (n) => `${bytes(n)} per partition`)],
          ])
        : null,
    ];
  }

  function retention(config, key, show) {
    const effective = config[`effective_${key}`] !== undefined ? config[`effective_${key}`] : config[key];
    const shown = effective === null || effective === undefined || effective < 0 ? "no limit" : show(effective);
    return `${shown} (${config[key] !== null && config[key] !== undefined ? "set on the topic" : "broker default"})`;
  }

  async function select(name) {
    setQuery({ topic: name });
    await load("topic-detail", `Describing ${name}`, async () => {
      current = await api("GET", `/v1/topics/${enc(name)}`);
      setUpBrowser(current);
      return describe(current);
    });
    fill("topic-list", list());
  }

  // The first page of messages may come from the URL: ?topic=&partition=&offset=&count=&isolation=
  const link = new URLSearchParams(location.search);
  let linked = true;

  function setUpBrowser(topic) {
    const select = $("#browse-partition");
    const keep = linked && link.get("partition") !== null ? link.get("partition") : select.value;
    fill(select, topic.partitions.map((p) => h("option", { value: p.partition }, String(p.partition))));
    if (keep && topic.partitions.some((p) => String(p.partition) === keep)) select.value = keep;
    $("#message-browser").hidden = false;
    if (linked) {
      linked = false;
      if (link.get("count")) $("#browse-count").value = link.get("count");
      if (["read_committed", "read_uncommitted"].includes(link.get("isolation"))) $("#browse-isolation").value = link.get("isolation");
      if (link.get("offset") !== null) {
        $("#browse-offset").value = link.get("offset");
        fetchMessages();
        return;
      }
    }
    latest();
  }

  function partitionState() {
    const partition = Number($("#browse-partition").value);
    return current.partitions.find((p) => p.partition === partition);
  }

  function count() {
    return Math.min(500, Math.max(1, Number($("#browse-count").value) || 50));
  }

  function latest() {
    const p = partitionState();
    $("#browse-offset").value = Math.max(p.log_start_offset, p.high_watermark - count());
    fetchMessages();
  }

  async function fetchMessages() {
    const partition = Number($("#browse-partition").value);
    const offset = Math.max(0, Number($("#browse-offset").value) || 0);
    const isolation = $("#browse-isolation").value;
    await load("messages", "Fetching messages", async () => {
      const answer = await api("GET", `/v1/topics/${enc(current.name)}/partitions/${partition}/messages`, {
        params: { offset, max_messages: count(), isolation },
      });
      page = { partition, offset, next: answer.next_offset };
      const stable = answer.last_stable_offset;
      const summary = h(
        "p",
        { class: "muted" },
        `Partition ${partition}, ${isolation}: ${answer.messages.length} message(s) from offset ${offset}; next offset ${answer.next_offset}, `,
        `last stable ${number(stable)}, high watermark ${number(answer.high_watermark)}.`
      );
      return [
        summary,
        table(
          [
            {
              title: "Offset",
              num: true,
              cell: (m) => (m.offset >= stable ? [number(m.offset), " ", h("span", { class: "badge state-open", title: "at or past the last stable offset: its transaction is not finished" }, "unstable")] : number(m.offset)),
            },
            { title: "Time", cls: "nowrap", cell: (m) => h("time", { datetime: new Date(m.timestamp).toISOString() }, clock(m.timestamp)) },
            { title: "Key", cls: "nowrap", cell: (m) => (m.key === null ? h("span", { class: "muted" }, "null") : ident(m.key)) },
            { title: "Value", cls: "value-cell", cell: valueCell },
            { title: "Headers", cell: (m) => (Object.keys(m.headers || {}).length ? h("code", {}, JSON.stringify(m.headers)) : "") },
          ],
          answer.messages,
          { empty: isolation === "read_committed" && stable < answer.high_watermark && offset >= stable ? "Nothing readable yet: an open transaction holds this partition's last stable offset back." : "No messages at this offset." }
        ),
      ];
    });
  }

  $("#topic-filter").addEventListener("input", () => fill("topic-list", list()));
  $("#browse-form").addEventListener("submit", (e) => {
    e.preventDefault();
    fetchMessages();
  });
  $("#browse-partition").addEventListener("change", latest);
  $("#browse-isolation").addEventListener("change", fetchMessages);
  $("#browse-older").addEventListener("click", () => {
    const p = partitionState();
    $("#browse-offset").value = Math.max(p.log_start_offset, (page ? page.offset : p.high_watermark) - count());
    fetchMessages();
  });
  $("#browse-newer").addEventListener("click", () => {
    if (page) $("#browse-offset").value = page.next;
    fetchMessages();
  });
  $("#browse-latest").addEventListener("click", async () => {
    current = await api("GET", `/v1/topics/${enc(current.name)}`).catch(() => current);
    fill("topic-detail", describe(current));
    latest();
  });

  load("topic-list", "Listing topics", async () => {
    topics = (await api("GET", "/v1/topics")).topics;
    return list();
  }).then(() => {
    const wanted = queryParam("topic") || (topics.length === 1 ? topics[0].name : null);
    if (wanted) select(wanted);
  });
}

/* ---------- consumer groups ---------- */

function groupsPage() {
  let selected = null;

  function offsetsTable(offsets) {
    const total = offsets.reduce((n, o) => n + (o.lag || 0), 0);
    return [
      table(
        [
          { title: "Topic", cell: (o) => pageLink("topics", { topic: o.topic }, o.topic) },
          { title: "Partition", num: true, cell: (o) => o.partition },
          { title: "Committed offset", num: true, cell: (o) => number(o.offset) },
          { title: "Lag", num: true, cell: (o) => (o.lag > 0 ? h("strong", {}, number(o.lag)) : number(o.lag)) },
        ],
        offsets,
        { empty: "This group has committed no offsets." }
      ),
      offsets.length ? h("p", { class: "muted" }, `Total lag: ${number(total)} message(s).`) : null,
    ];
  }

  async function select(group) {
    selected = group;
    setQuery({ group });
    $("#group-name").value = group;
    highlight();
    try {
      const described = await api("GET", `/v1/groups/${enc(group)}`);
      fill(
        "group-members",
        h("p", {}, h("strong", {}, described.group), " ", badge(described.state), ` · ${described.members.length} member(s)`),
        table(
          [
            { title: "Member", cell: (m) => ident(m.member_id) },
            { title: "Epoch", num: true, cell: (m) => m.member_epoch },
            { title: "Assignment", cell: (m) => partitionList(m.assignment) },
            { title: "Last heartbeat", cell: (m) => when(m.last_heartbeat_ms) },
          ],
          described.members,
          { empty: "No live members: anyone may commit this group's offsets." }
        )
      );
      fill("group-offsets", offsetsTable(described.offsets));
    } catch (error) {
      if (!(error instanceof ApiError && error.notOffered)) {
        fill("group-members", problem(error, `Describing ${group}`));
        fill("group-offsets");
        return;
      }
      // An older broker: no members, but its committed offsets and lag (the v1 route).
      fill("group-members", problem(error, "Group members"));
      await load("group-offsets", `Offsets of ${group}`, async () => offsetsTable((await api("GET", `/v1/groups/${enc(group)}/offsets`)).offsets));
    }
  }

  function highlight() {
    for (const row of document.querySelectorAll("[data-group]")) row.classList.toggle("selected", row.dataset.group === selected);
  }

  $("#group-lookup").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#group-name").value.trim();
    if (name) select(name);
  });

  load("group-list", "Listing consumer groups", async () => {
    const groups = (await api("GET", "/v1/groups")).groups;
    return table(
      [
        { title: "Group", cell: (g) => h("a", { href: `?group=${enc(g.group)}`, onclick: (e) => { e.preventDefault(); select(g.group); } }, g.group) },
        { title: "State", cell: (g) => badge(g.state) },
        { title: "Members", num: true, cell: (g) => number(g.members) },
        { title: "Lag", num: true, cell: (g) => (g.lag === undefined ? "–" : g.lag > 0 ? h("span", { class: "warn-text" }, number(g.lag)) : "0") },
      ],
      groups,
      { empty: "No consumer groups yet.", rowAttrs: (g) => ({ "data-group": g.group }) }
    );
  }).then(() => {
    highlight();
    if (queryParam("group")) select(queryParam("group"));
  });
}

/* ---------- share groups ---------- */

function sharePage() {
  async function list() {
    await load("share-list", "Listing share groups", async () => {
      const groups = (await api("GET", "/v1/share-groups")).share_groups;
      return table(
        [
          { title: "Share group", cell: (g) => h("a", { href: `?group=${enc(g.group)}`, onclick: (e) => { e.preventDefault(); select(g.group); } }, g.group) },
          { title: "Topics", cell: (g) => g.topics.join(", ") },
          { title: "Locked", num: true, cell: (g) => number(g.locked) },
          { title: "Accepted", num: true, cell: (g) => number(g.accepted) },
          { title: "Dead-lettered", num: true, cell: (g) => (g.dlq > 0 ? h("span", { class: "warn-text" }, number(g.dlq)) : number(g.dlq)) },
          { title: "", cell: deleteButton },
        ],
        groups,
        { empty: "No share group has received from a topic yet.", rowAttrs: (g) => ({ "data-share": g.group }) }
      );
    });
  }

  function deleteButton(group) {
    return h("button", {
      type: "button",
      class: "danger",
      onclick: async (e) => {
        const clicked = e.currentTarget;
        const question = `Delete share group ${group.group}?`;
        const text = "Its positions and in-flight records are forgotten: used again, it starts from the beginning of each partition. Refused while records are locked.";
        if (!(await confirmAction(question, text, "Delete"))) return;
        await act(clicked, () => api("DELETE", `/v1/share-groups/${enc(group.group)}`), () => `Share group ${group.group} deleted`, async () => {
          if (queryParam("group") === group.group) fill("share-detail", h("p", { class: "muted" }, "Deleted."));
          await list();
        });
      },
    }, "Delete");
  }

  async function select(group) {
    setQuery({ group });
    $("#share-name").value = group;
    await load("share-detail", `Describing share group ${group}`, async () => {
      const described = await api("GET", `/v1/share-groups/${enc(group)}`);
      const partitions = described.topics.flatMap((t) => (t.partitions || []).map((p) => ({ topic: t.topic, ...p })));
      return [
        table(
          [
            { title: "Topic", cell: (t) => pageLink("topics", { topic: t.topic }, t.topic) },
            { title: "Available", num: true, cell: (t) => number(t.available) },
            { title: "Locked", num: true, cell: (t) => number(t.locked) },
            { title: "Accepted", num: true, cell: (t) => number(t.accepted) },
            { title: "Dead-lettered", num: true, cell: (t) => (t.dlq > 0 ? h("span", { class: "warn-text" }, number(t.dlq)) : number(t.dlq)) },
          ],
          described.topics,
          { empty: `Share group ${described.group} has received nothing yet.` }
        ),
        partitions.length && partitions.some((p) => p.start_offset !== undefined)
          ? table(
              [
                { title: "Topic", cell: (p) => p.topic },
                { title: "Partition", num: true, cell: (p) => p.partition },
                { title: "Start offset", num: true, cell: (p) => number(p.start_offset) },
                { title: "End offset", num: true, cell: (p) => number(p.end_offset) },
                { title: "Available", num: true, cell: (p) => number(p.available) },
                { title: "Locked", num: true, cell: (p) => number(p.locked) },
                { title: "Accepted", num: true, cell: (p) => number(p.accepted) },
                { title: "Dead-lettered", num: true, cell: (p) => number(p.dlq) },
              ],
              partitions,
              { caption: "By partition" }
            )
          : null,
        described.topics.some((t) => t.dlq > 0) ? h("p", {}, "Dead letters: ", pageLink("topics", { topic: `DLQ.${described.group}` }, `DLQ.${described.group}`)) : null,
      ];
    });
  }

  $("#share-lookup").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#share-name").value.trim();
    if (name) select(name);
  });
  list();
  if (queryParam("group")) select(queryParam("group"));
}

/* ---------- half messages ---------- */

// A message's value, as the topic browser and the half-message pages show it: short ones inline,
// long ones folded; "…" where the broker cut it (a half-message list sends 256 characters).
function valueCell(message) {
  if (message.body_hidden) return h("span", { class: "muted" }, "hidden: needs topic:read");
  let text;
  if ("value_base64" in message) text = `base64:${message.value_base64}`;
  else if ("value" in message) text = typeof message.value === "string" ? message.value : JSON.stringify(message.value);
  else return h("span", { class: "muted" }, "–");
  if (message.value_truncated) text += "…";
  if (text.length <= 160) return h("span", { class: "value" }, text);
  return h("details", { class: "value" }, h("summary", {}, `${text.slice(0, 160)}…`), h("pre", {}, text));
}

function headersCell(headers) {
  const names = Object.keys(headers || {});
  if (!names.length) return h("span", { class: "muted" }, "none");
  return h("span", { class: "value" }, names.map((n) => `${n}=${headers[n]}`).join(", "));
}

function halfPage() {
  let selected = null;

  async function list() {
    await load("half-list", "Listing half messages", async () => {
      const state = $("#half-state").value;
      const group = $("#half-group").value.trim();
      const answer = await api("GET", "/v1/half-messages", { params: { state, producer_group: group, limit: 500 } });
      return table(
        [
          { title: "Message", cell: (m) => h("a", { href: `?id=${enc(m.message_id)}`, onclick: (e) => { e.preventDefault(); select(m.message_id); } }, shortIdent(m.message_id)) },
          { title: "Producer group", cell: (m) => m.producer_group },
          { title: "Topic", cell: (m) => m.topic },
          { title: "State", cell: (m) => badge(m.state) },
          { title: "Checks", num: true, cell: (m) => m.check_times },
          { title: "Born", cell: (m) => when(m.born_timestamp) },
          { title: "Key", cell: (m) => (m.key === undefined || m.key === null ? h("span", { class: "muted" }, "–") : h("span", { class: "ident nowrap" }, m.key)) },
          { title: "Value", cls: "value-cell", cell: valueCell },
        ],
        answer.half_messages,
        {
          empty: "No half messages match.",
          rowAttrs: (m) => ({ "data-message": m.message_id, class: m.message_id === selected ? "selected" : null }),
        }
      );
    });
  }

  function actions(half) {
    const buttons = [];
    const button = (label, kind, action, question, text) =>
      h("button", {
        type: "button",
        class: kind,
        onclick: async (e) => {
          const clicked = e.currentTarget; // gone from the event once it has been handled
          if (!(await confirmAction(question, text, label))) return;
          await act(
            clicked,
            () => api("POST", `/v1/half-messages/${enc(half.message_id)}/${action}`),
            (a) => `Half message ${a.message_id}: ${a.state}${a.offset !== undefined && a.offset !== null ? ` (${a.topic}-${a.partition} at offset ${a.offset})` : ""}`,
            async () => {
              await select(half.message_id);
              await list();
            }
          );
        },
      }, label);
    if (half.state === "PREPARED") {
      buttons.push(button("Commit", "primary", "commit", "Commit this half message?", `It is delivered to ${half.topic} and can no longer be rolled back.`));
      buttons.push(button("Roll back", "danger", "rollback", "Roll back this half message?", "It is never delivered, and can no longer be committed."));
    }
    if (half.state === "DISCARDED") {
      buttons.push(button("Recheck", "primary", "recheck", "Check this message again?", "It goes back to PREPARED with no checks counted: the checker asks its producer group again."));
    }
    return buttons.length ? h("div", { class: "actions" }, buttons) : null;
  }

  async function select(id) {
    selected = id;
    setQuery({ id, state: $("#half-state").value, group: $("#half-group").value.trim() });
    for (const row of document.querySelectorAll("[data-message]")) row.classList.toggle("selected", row.dataset.message === id);
    await load("half-detail", `Describing half message ${id}`, async () => {
      const half = await api("GET", `/v1/half-messages/${enc(id)}`);
      const checks = half.checks;
      return [
        h("p", {}, badge(half.state), " ", ident(half.message_id)),
        fields([
          ["Transaction id", ident(half.transaction_id)],
          ["Producer group", half.producer_group],
          ["Topic", [pageLink("topics", { topic: half.topic }, half.topic), half.partition !== undefined ? `, partition ${half.partition}` : ""]],
          half.offset !== undefined && half.offset !== null ? ["Offset", number(half.offset)] : null,
          ["Born", [clock(half.born_timestamp), " (", when(half.born_timestamp), ")"]],
          ["Back-checks", number(half.check_times)],
          half.resolved_by ? ["Resolved", [`by ${half.resolved_by}, `, when(half.resolved_at)]] : null,
          half.body_hidden || "headers" in half ? ["Key", half.key === undefined || half.key === null ? h("span", { class: "muted" }, "none") : ident(half.key)] : null,
          "headers" in half ? ["Headers", headersCell(half.headers)] : null,
          half.body_hidden || "headers" in half ? ["Value", valueCell(half)] : null,
        ]),
        actions(half),
        h("h3", {}, "Check history"),
        checks === undefined
          ? h("div", { class: "notice not-offered" }, h("strong", {}, "Not offered by this broker. "), "Its half-message answers carry no check history.")
          : table(
              [
                { title: "At", cell: (c) => clock(c.at_ms) },
                { title: "Instance", cell: (c) => (c.instance_id ? ident(c.instance_id) : h("span", { class: "muted" }, "no live listener")) },
                { title: "Answer", cell: (c) => badge(c.answer || "AWAITED") },
                { title: "Latency", num: true, cell: (c) => (c.latency_ms === null || c.latency_ms === undefined ? "–" : `${c.latency_ms} ms`) },
              ],
              checks,
              { empty: "Not checked yet: the checker asks once the transaction timeout has passed." }
            ),
      ];
    });
  }

  $("#half-state").value = queryParam("state") || "";
  $("#half-group").value = queryParam("group") || "";
  $("#half-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    setQuery({ state: $("#half-state").value, group: $("#half-group").value.trim() });
    list();
  });
  list().then(() => {
    if (queryParam("id")) select(queryParam("id"));
  });
}

/* ---------- transactions ---------- */

function hangingFirst(transactions) {
  const open = transactions.filter((t) => UNFINISHED.includes(t.state)).sort((a, b) => a.started_ms - b.started_ms);
  const ended = transactions.filter((t) => !UNFINISHED.includes(t.state)).sort((a, b) => b.last_state_change_ms - a.last_state_change_ms);
  return [...open, ...ended];
}

function transactionsPage() {
  function abortButton(txn) {
    if (!UNFINISHED.includes(txn.state)) return null;
    return h("button", {
      type: "button",
      class: "danger small",
      "data-abort": txn.txn_id,
      onclick: async (e) => {
        const clicked = e.currentTarget;
        const where = txn.partitions && txn.partitions.length ? ` Consumers of ${partitionList(txn.partitions)} go on past it.` : "";
        if (!(await confirmAction(`Abort transaction ${txn.txn_id}?`, `Its messages are never read_committed.${where}`, "Abort"))) return;
        await act(clicked, () => api("POST", `/v1/transactions/${enc(txn.txn_id)}/abort`), (a) => `Transaction ${a.txn_id}: ${a.state}`, refresh);
      },
    }, "Abort");
  }

  function age(txn) {
    const elapsed = Date.now() - txn.started_ms;
    if (UNFINISHED.includes(txn.state) && elapsed > txn.timeout_ms) {
      return h("span", { class: "warn-text", title: "past its timeout: the broker should have aborted it" }, `${span(elapsed)} · overdue`);
    }
    return span(elapsed);
  }

  async function list() {
    await load("txn-list", "Listing transactions", async () => {
      const choice = $("#txn-state").value;
      const states = choice === "unfinished" ? UNFINISHED : [choice];
      const seconds = Number($("#txn-older").value);
      const params = { older_than_ms: seconds > 0 ? Math.round(seconds * 1000) : null, transactional_id: $("#txn-tid").value.trim() };
      const lists = await Promise.all(states.map((state) => api("GET", "/v1/transactions", { params: { ...params, state } })));
      const seen = new Map();
      for (const t of lists.flatMap((l) => l.transactions)) seen.set(t.txn_id, t);
      return table(
        [
          { title: "Transaction", cell: (t) => h("a", { href: `?txn=${enc(t.txn_id)}`, onclick: (e) => { e.preventDefault(); lookUp(t.txn_id); } }, ident(t.txn_id)) },
          { title: "Transactional id", cell: (t) => t.transactional_id || h("span", { class: "muted" }, "–") },
          { title: "Producer", cell: (t) => (t.producer_id === null || t.producer_id === undefined ? "–" : `${t.producer_id} / epoch ${t.producer_epoch}`) },
          { title: "State", cell: (t) => badge(t.state) },
          { title: "Age", num: true, cell: age },
          { title: "Timeout", num: true, cell: (t) => span(t.timeout_ms) },
          { title: "Last change", cell: (t) => when(t.last_state_change_ms) },
          { title: "Partitions", cell: (t) => partitionList(t.partitions) },
          { title: "", cell: abortButton },
        ],
        hangingFirst([...seen.values()]),
        { empty: choice === "unfinished" ? "No unfinished transactions: nothing holds a partition back." : "No transactions match.", rowAttrs: (t) => ({ "data-txn": t.txn_id }) }
      );
    });
  }

  async function lookUp(id) {
    $("#txn-id").value = id;
    setQuery({ txn: id });
    await load("txn-detail", `Describing transaction ${id}`, async () => {
      const txn = await api("GET", `/v1/transactions/${enc(id)}`);
      return [
        h("p", {}, badge(txn.state), " ", ident(txn.txn_id)),
        fields([
          txn.transactional_id ? ["Transactional id", txn.transactional_id] : null,
          txn.producer_id !== null && txn.producer_id !== undefined ? ["Producer", `${txn.producer_id} / epoch ${txn.producer_epoch}`] : null,
          txn.started_ms ? ["Started", [clock(txn.started_ms), " (", when(txn.started_ms), ")"]] : null,
          txn.started_ms ? ["Age", age(txn)] : null,
          ["Timeout", span(txn.timeout_ms)],
          ["Partitions", partitionList(txn.partitions)],
        ]),
        h("div", { class: "actions" }, abortButton(txn)),
      ];
    });
  }

  async function refresh() {
    await list();
    const id = $("#txn-id").value.trim();
    if (id && slot("txn-detail").childElementCount) await lookUp(id);
  }

  const wanted = queryParam("state");
  if (wanted !== null) $("#txn-state").value = wanted === "any" ? "" : wanted;
  $("#txn-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    list();
  });
  $("#txn-lookup").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("#txn-id").value.trim();
    if (id) lookUp(id);
  });
  list();
  if (queryParam("txn")) lookUp(queryParam("txn"));
}

/* ---------- start ---------- */

const PAGES = {
  overview: overviewPage,
  topics: topicsPage,
  groups: groupsPage,
  "share-groups": sharePage,
  "half-messages": halfPage,
  transactions: transactionsPage,
};

document.addEventListener("DOMContentLoaded", () => {
  setUpSession();
  PAGES[document.body.dataset.page]();
});
