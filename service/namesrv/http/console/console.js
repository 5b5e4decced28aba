// The read-only console: polls /v1/console/overview, lists topics, follows /v1/watch (SSE).
"use strict";
const $ = (id) => document.getElementById(id);
const MAX_TOPICS_SHOWN = 500; // a fleet may hold many thousands: the filter narrows them
const MAX_CHANGES = 200;
let topics = [];

function text(tag, value, cls) {
  const el = document.createElement(tag);
  el.textContent = value;
  if (cls) el.className = cls;
  return el;
}

async function getJson(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) throw new Error(url + ": " + resp.status);
  return resp.json();
}

async function refreshOverview() {
  const o = await getJson("/v1/console/overview");
  $("health").textContent = "worker " + o.worker + " · Redis " + (o.redis.reachable ? "up" : "DOWN " + o.redis.reason) +
    " · " + o.workersSeen + " workers seen · " + o.topics + " topics · " + o.watchers + " watchers";
  const body = $("brokers").tBodies[0];
  const rows = [];
  const clusters = o.cluster.clusterAddrTable || {};
  const owner = {};
  for (const [cluster, names] of Object.entries(clusters)) for (const n of names) owner[n] = cluster;
  const live = {};
  for (const l of o.liveness || []) live[l.brokerName + "#" + l.brokerId] = l;
  const seconds = (ms) => (ms === null || ms === undefined ? "" : (ms / 1000).toFixed(1) + " s");
  for (const [name, data] of Object.entries(o.cluster.brokerAddrTable || {})) {
    for (const [id, addr] of Object.entries(data.brokerAddrs || {})) {
      const tr = document.createElement("tr");
      tr.dataset.broker = name;
      const l = live[name + "#" + id] || {};
      for (const v of [owner[name] || data.cluster, name, id, id === "0" ? "master" : "slave", addr, data.zoneName || "",
        seconds(l.heartbeatAgeMillis), seconds(l.expiresInMillis), l.via || ""]) {
        tr.appendChild(text("td", v));
      }
      rows.push(tr);
    }
  }
  body.replaceChildren(...rows);
  $("kv").replaceChildren(...Object.entries(o.kvNamespaces).map(([ns, bytes]) => text("li", ns + " (" + bytes + " bytes)")));
}

async function refreshTopics() {
  const t = await getJson("/v1/topics");
  topics = (t.topicList || []).slice().sort();
  renderTopics();
}

function renderTopics() {
  const needle = $("topic-filter").value.trim().toLowerCase();
  const shown = topics.filter((t) => t.toLowerCase().includes(needle));
  $("topic-count").textContent = "(" + shown.length + " of " + topics.length + ")";
  $("topics").replaceChildren(...shown.slice(0, MAX_TOPICS_SHOWN).map((t) => {
    const li = text("li", t);
    li.onclick = () => showRoute(t);
    return li;
  }));
}

async function showRoute(topic) {
  const r = await getJson("/v1/routes/" + encodeURIComponent(topic));
  const queues = (r.queueDatas || []).map((q) => q.brokerName + ": read " + q.readQueueNums + " write " + q.writeQueueNums + " perm " + q.perm);
  $("route").textContent = topic + "\n" + queues.join("\n");
}

function followChanges() {
  const source = new EventSource("/v1/watch");
  const onEvent = (e) => {
    const d = JSON.parse(e.data);
    const line = new Date().toISOString().slice(11, 19) + " " + e.type + " " + (d.brokers || []).join(",") +
      " " + (d.topics || []).slice(0, 5).join(",") + (d.state ? " [" + d.state + "]" : "");
    $("changes").prepend(text("li", line, d.state === "down" || d.state === "expired" ? "down" : ""));
    while ($("changes").children.length > MAX_CHANGES) $("changes").lastChild.remove();
    scheduleRefresh();
  };
  for (const kind of ["register", "registerQueues", "unregister", "close", "expire", "cleanQueues", "wipePerm",
    "addPerm", "topicRegister", "topicDelete", "config", "heartbeat", "resync"]) {
    source.addEventListener(kind, onEvent);
  }
}

let pending = null;
function scheduleRefresh() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refreshOverview(); refreshTopics(); }, 200);
}

$("topic-filter").addEventListener("input", renderTopics);
refreshOverview();
refreshTopics();
followChanges();
setInterval(refreshOverview, 5000);
