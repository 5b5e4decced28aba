// The read-only console: polls /v1/console/overview, lists topics (/v1/console/topics), follows
// /v1/watch (SSE).
"use strict";
const $ = (id) => document.getElementById(id);
const MAX_TOPICS_SHOWN = 500; // a fleet may hold many thousands: the server filters, the page shows these
const MAX_CHANGES = 200;
const REPORT_HINT = "route-history report: not configured (consoleReportUrl; docs/PIPELINE.md makes one)";

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
    " · " + o.workersSeen + " workers seen · " + o.topics + " topics · " + o.watchers + " watchers · " +
    cacheText(o.routeCache);
  showReport(o.reportUrl);
  const body = $("brokers").tBodies[0];
  const rows = [];
  const clusters = o.cluster.clusterAddrTable || {};
  const owner = {};
  for (const [cluster, names] of Object.entries(clusters)) for (const n of names) owner[n] = cluster;
  const live = {};
  for (const l of o.liveness || []) live[l.brokerName + "#" + l.brokerId] = l;
  const perms = o.brokerPerms || {};
  const seconds = (ms) => (ms === null || ms === undefined ? "" : (ms / 1000).toFixed(1) + " s");
  for (const [name, data] of Object.entries(o.cluster.brokerAddrTable || {})) {
    for (const [id, addr] of Object.entries(data.brokerAddrs || {})) {
      const tr = document.createElement("tr");
      tr.dataset.broker = name;
      const l = live[name + "#" + id] || {};
      for (const v of [owner[name] || data.cluster, name, id, id === "0" ? "master" : "slave", addr, data.zoneName || "",
        versionText(l), permText(perms[name]), seconds(l.heartbeatAgeMillis), seconds(l.expiresInMillis), l.via || ""]) {
        tr.appendChild(text("td", v));
      }
      if (perms[name] && perms[name].perm !== "rw") tr.cells[7].className = "readonly";
      rows.push(tr);
    }
  }
  body.replaceChildren(...rows);
  $("kv").replaceChildren(...Object.entries(o.kvNamespaces).map(([ns, bytes]) => text("li", ns + " (" + bytes + " bytes)")));
}

function versionText(l) {
  if (l.versionName) return l.versionName;
  return l.version === null || l.version === undefined ? "" : String(l.version);
}

// "rw", "read-only" or "partly writable", from the broker name's queues (checked: how many were read)
function permText(p) {
  if (!p) return "";
  return p.checked < p.topics ? p.perm + " (" + p.checked + " of " + p.topics + " topics read)" : p.perm;
}

function cacheText(c) {
  if (!c || !c.enabled) return "route cache off";
  const ratio = c.hitRatio === null ? "–" : (100 * c.hitRatio).toFixed(1) + "%";
  return "route cache hits " + ratio + " (" + c.hits + " hits, " + c.misses + " misses)";
}

function showReport(url) {
  const link = $("report");
  if (url) {
    link.href = url;
    link.textContent = "route-history report";
  } else {
    link.removeAttribute("href");
    link.textContent = REPORT_HINT;
  }
}

async function refreshTopics() {
  const needle = $("topic-filter").value.trim();
  const t = await getJson("/v1/console/topics?limit=" + MAX_TOPICS_SHOWN + "&filter=" + encodeURIComponent(needle));
  $("topic-count").textContent = "(" + t.matched + " of " + t.total + ")";
  $("topics").replaceChildren(...t.topics.map((q) => {
    const li = document.createElement("li");
    li.dataset.topic = q.topic;
    li.append(text("span", q.topic), text("span", " read " + q.readQueueNums + " · write " + q.writeQueueNums, "queues"));
    li.onclick = () => showRoute(q.topic);
    return li;
  }));
}

let filtering = null;
function onFilter() {
  clearTimeout(filtering);
  filtering = setTimeout(refreshTopics, 150);
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

$("topic-filter").addEventListener("input", onFilter);
refreshOverview();
refreshTopics();
followChanges();
setInterval(refreshOverview, 5000);
