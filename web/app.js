// The kvstrategies page: Pyodide runs the project's wheel; every answer is the JSON of the same
// `kvstrategies` command line a terminal would run (kvstrategies/cli/web.py, run_command).
import { loadPyodide } from "./pyodide/pyodide.mjs";

const $ = (id) => document.getElementById(id);
const FIELDS = ["model", "hf", "config", "gpu", "gpu_memory", "count", "tp", "pp", "ep", "attn_dp", "kv", "page",
  "lengths", "engine", "release", "vllm_release"];
const DEFAULTS = { model: "llama-3.1-8b", gpu: "H100-80GB", count: "8", tp: "1", pp: "1", ep: "1", attn_dp: "1",
  engine: "sglang" };
const COLORS = { overhead: "#8c959f", weights: "#0969da", kv: "#1a7f37", state: "#bf8700", index: "#8250df",
  slack: "#d0d7de", activations: "#cf222e", unused: "#ffffff" };
// what the browser test reads: load time and the last command's time, in milliseconds; `done`
// counts finished answers (a plan that fetches from the Hub finishes after its click)
const timing = (window.kvTiming = { load_ms: null, last_ms: null, runs: 0, done: 0 });
// the Hub the page fetches a HF id's files from (`?hub=` points it elsewhere, e.g. a mirror)
const hubBase = () => (new URLSearchParams(location.search).get("hub") || "https://huggingface.co").replace(/\/+$/, "");
// where fetched files go in Pyodide's file system: a Hugging Face cache, which the planner reads
// as it reads ~/.cache/huggingface/hub (kvstrategies/planner/model_source.py, cached_snapshot)
const HF_CACHE = "/hf-cache";
const HUB_FILES = ["config.json", "hf_quant_config.json", "model.safetensors.index.json"];
const fetched = new Set();
let pyodide = null;
let web = null;

const fmt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"));
const gib = (b) => (b / 2 ** 30).toFixed(2) + " GiB";
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
};

function state() {
  const s = {};
  for (const f of FIELDS) s[f] = $(f).value.trim();
  return s;
}

function setState(params) {
  for (const f of FIELDS) {
    const value = params.get(f) ?? DEFAULTS[f] ?? "";
    if ($(f).tagName === "SELECT" && ![...$(f).options].some((o) => o.value === value)) continue;
    $(f).value = value;
  }
}

function saveState(view) {
  const params = new URLSearchParams();
  const s = state();
  for (const f of FIELDS) if (s[f] !== "" && s[f] !== (DEFAULTS[f] ?? "")) params.set(f, s[f]);
  const hub = new URLSearchParams(location.search).get("hub");
  if (hub) params.set("hub", hub);
  params.set("view", view);
  history.replaceState(null, "", "?" + params.toString());
}

function run(argv) {
  const t = performance.now();
  const result = JSON.parse(web.run_command(pyodide.toPy(argv)));
  timing.last_ms = performance.now() - t;
  timing.runs += 1;
  return result;
}

function modelArg(s) {
  if (s.config) {
    pyodide.FS.writeFile("/tmp/config.json", s.config);
    return "/tmp/config.json";
  }
  return s.hf || s.model;
}

// A HF id's config.json (and, where the repository has them, hf_quant_config.json and the
// safetensors index) fetched by the browser into the page's HF cache, in the hub's layout
// models--ORG--NAME/snapshots/COMMIT/ with refs/main naming COMMIT (the X-Repo-Commit header).
async function fetchHub(id) {
  const HUB = hubBase();
  if (fetched.has(`${HUB} ${id}`)) return;
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(id)) throw new Error(`${id} is not a HF id (org/name)`);
  const files = {};
  let commit = null;
  for (const name of HUB_FILES) {
    let response;
    try { response = await fetch(`${HUB}/${id}/resolve/main/${name}`); }
    catch (error) { if (name === "config.json") throw new Error(`could not reach ${HUB} for ${id} (${error})`); continue; }
    if (!response.ok) {
      if (name !== "config.json") continue;
      throw new Error(`${HUB} answered ${response.status} for ${id}/config.json: check the id; a gated model ` +
        "needs its config pasted below");
    }
    files[name] = await response.text();
    commit ??= response.headers.get("x-repo-commit");
  }
  if (!/^[0-9a-f]{40}$/.test(commit ?? "")) commit = "0".repeat(40);  // the hub did not say: one fixed name
  const repo = `${HF_CACHE}/models--${id.replace("/", "--")}`;
  pyodide.FS.mkdirTree(`${repo}/snapshots/${commit}`);
  pyodide.FS.mkdirTree(`${repo}/refs`);
  for (const [name, text] of Object.entries(files)) pyodide.FS.writeFile(`${repo}/snapshots/${commit}/${name}`, text);
  pyodide.FS.writeFile(`${repo}/refs/main`, commit);
  fetched.add(`${HUB} ${id}`);
}

function machine(s, memoryOnly = false) {
  const out = [];
  if (s.gpu && !memoryOnly) out.push("--gpu", s.gpu);
  if (s.gpu_memory) out.push("--gpu-memory", s.gpu_memory);
  return out;
}

function lengths(s) {
  return s.lengths.split(",").map((x) => x.trim()).filter(Boolean).flatMap((x) => ["--request-length", x]);
}

export function sglangArgv(s) {
  const a = ["plan", modelArg(s), ...machine(s), "--tp", s.tp || "1"];
  if (s.pp && s.pp !== "1") a.push("--pp-size", s.pp);
  if (s.ep && s.ep !== "1") a.push("--ep-size", s.ep);
  if (s.attn_dp && s.attn_dp !== "1") a.push("--attn-dp", s.attn_dp);
  if (s.kv) a.push("--kv-cache-dtype", s.kv);
  if (s.page) a.push("--page-size", s.page);
  if (s.release) a.push("--sglang-version", s.release);
  return [...a, ...lengths(s), "--json"];
}

export function vllmArgv(s) {
  const a = ["plan", modelArg(s), "--engine", "vllm", ...machine(s), "--tp", s.tp || "1"];
  if (s.pp && s.pp !== "1") a.push("--pp-size", s.pp);
  // vLLM's expert parallelism spans the TP ranks (--enable-expert-parallel); another EP size is SGLang's, which
  // the vLLM plan refuses with its reason
  if (s.ep && s.ep !== "1") a.push(...(s.ep === (s.tp || "1") ? ["--enable-expert-parallel"] : ["--ep-size", s.ep]));
  if (s.kv) a.push("--kv-cache-dtype", s.kv);
  if (s.vllm_release) a.push("--vllm-version", s.vllm_release);
  return [...a, ...lengths(s), "--json"];
}

function shell(argv) {
  return "kvstrategies " + argv.map((x) => (/^[\w.,=/:-]+$/.test(x) ? x : `'${x}'`)).join(" ");
}

function commandBlock(text, label) {
  const pre = el("pre", { class: "command", "data-field": "command" }, text);
  const button = el("button", { type: "button", class: "copy" }, "Copy");
  button.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
    catch { button.textContent = "Select and copy the text"; }
  });
  return el("div", {}, el("h3", {}, label, " "), button, pre);
}

// One GPU as a stacked bar: each row's bytes as a share of the GPU's capacity.
function stackedBar(rows, capacity, title) {
  const ns = "http://www.w3.org/2000/svg";
  const width = 560, height = 46;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height + 14}`);
  svg.setAttribute("width", width);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", title);
  let x = 0;
  const legend = el("div", { class: "legend" });
  const used = rows.reduce((t, r) => t + Math.max(0, r.bytes), 0);
  const all = [...rows];
  if (capacity > used) all.push({ label: "not used", bytes: capacity - used, kind: "unused" });
  const total = Math.max(capacity, used);
  for (const r of all) {
    if (r.bytes <= 0) continue;
    const w = (r.bytes / total) * width;
    const rect = document.createElementNS(ns, "rect");
    Object.entries({ x, y: 0, width: Math.max(w, 0.5), height, fill: COLORS[r.kind] || "#afb8c1",
      stroke: "#fff", "data-kind": r.kind }).forEach(([k, v]) => rect.setAttribute(k, v));
    const tip = document.createElementNS(ns, "title");
    tip.textContent = `${r.label}: ${gib(r.bytes)}`;
    rect.append(tip);
    svg.append(rect);
    x += w;
  }
  const caption = document.createElementNS(ns, "text");
  caption.setAttribute("x", 0);
  caption.setAttribute("y", height + 12);
  caption.textContent = `${title}: ${gib(capacity)}`;
  svg.append(caption);
  const kinds = {};
  for (const r of all) kinds[r.kind] = (kinds[r.kind] || 0) + r.bytes;
  for (const [k, b] of Object.entries(kinds)) {
    legend.append(el("span", {}, el("i", { style: `background:${COLORS[k] || "#afb8c1"};border:1px solid #aaa` }),
      `${k} ${gib(b)}`));
  }
  return el("div", { class: "breakdown" }, svg, legend);
}

function refusal(card, result) {
  let doc = null;
  try { doc = JSON.parse(result.stdout); } catch { /* a usage error prints one line */ }
  card.classList.add("refused");
  const message = doc?.error || result.stderr.replace(/^kvstrategies: error: /, "");
  card.append(el("p", { class: "headline", "data-field": "refused" }, "Does not fit or refused"));
  card.append(el("p", { "data-field": "error" }, message));
  if (doc?.fix) card.append(el("p", {}, "Fix: ", doc.fix));
  const options = doc?.options || [];
  if (options.length) {
    const table = el("table", { "data-field": "options" },
      el("tr", {}, el("th", { class: "text" }, "option"), el("th", {}, "tokens"), el("th", {}, "longest request"),
        el("th", { class: "text" }, "cost")));
    for (const o of options) {
      table.append(el("tr", {}, el("td", { class: "text" }, o.flag), el("td", { "data-field": "option-tokens" },
        fmt(o.capacity_tokens)), el("td", {}, fmt(o.max_fitting_length)), el("td", { class: "text" }, o.cost)));
    }
    card.append(el("h3", {}, "Options that fit, each planned again"), table);
    if (options[0].sglang_command) card.append(commandBlock(options[0].sglang_command.text, "Launch the first option"));
  }
}

function concurrencyTable(items) {
  const table = el("table", { "data-field": "concurrency" },
    el("tr", {}, el("th", {}, "request length"), el("th", {}, "requests at once"), el("th", { class: "text" },
      "limited by")));
  for (const c of items) {
    table.append(el("tr", { "data-length": c.request_length }, el("td", {}, fmt(c.request_length)),
      el("td", { "data-field": "requests" }, c.served === false ? 0 : fmt(c.requests)),
      el("td", { class: "text" }, c.limited_by)));
  }
  return table;
}

function renderSglang(s) {
  const argv = sglangArgv(s);
  const result = run(argv);
  const label = `SGLang ${s.release || $("release").value}`;
  const card = el("article", { class: "answer", "data-engine": "sglang" }, el("h2", {}, label));
  card.append(el("p", { class: "same" }, "Same as ", el("code", { "data-field": "argv" }, shell(argv))));
  if (result.rc !== 0) { refusal(card, result); return card; }
  const doc = JSON.parse(result.stdout);
  const p = doc.planner;
  const a = p.answer;
  card.append(el("p", { class: "headline" }, el("span", { "data-field": "tokens" }, fmt(a.tokens_total)),
    " tokens, ", el("span", { "data-field": "max-running" }, fmt(a.max_running_requests_per_worker)),
    " requests at most", a.attention_dp_workers * a.dp_replicas > 1 ? " per worker" : ""));
  card.append(el("p", {}, `on ${p.gpu || "the budget given"}; longest request that fits `,
    el("span", { "data-field": "max-length" }, fmt(a.max_fitting_length)),
    a.context_fits ? " (the whole context)" : " (the context does not fit)"));
  card.append(concurrencyTable(a.concurrency.map((c) => ({ ...c, requests: c.total }))));
  if (p.breakdown) {
    card.append(el("h3", {}, "Where one GPU's memory goes"),
      stackedBar(p.breakdown.rows, p.breakdown.capacity_bytes, `one GPU (rank) of ${p.gpu || "the budget"}`));
  }
  if (p.fixes && p.fixes.length) {
    const list = el("ul", { "data-field": "fixes" });
    for (const f of p.fixes) list.append(el("li", {}, `${f.flag}: ${fmt(f.capacity_tokens)} tokens (${f.cost})`));
    card.append(el("h3", {}, "To fit the whole context"), list);
  }
  if (p.sglang_command) card.append(commandBlock(p.sglang_command.text, "Launch command"));
  return card;
}

function renderVllm(s) {
  const argv = vllmArgv(s);
  const result = run(argv);
  const card = el("article", { class: "answer", "data-engine": "vllm" }, el("h2", {}, `vLLM ${s.vllm_release || $("vllm_release").value}`, " (its own budget rule)"));
  card.append(el("p", { class: "same" }, "Same as ", el("code", { "data-field": "argv" }, shell(argv))));
  if (result.rc !== 0) { refusal(card, result); return card; }
  const doc = JSON.parse(result.stdout);
  const log = doc.vllm_log;
  card.append(el("p", { class: "headline" }, el("span", { "data-field": "tokens" }, fmt(log.gpu_kv_cache_size_tokens)),
    " tokens, ", el("span", { "data-field": "max-concurrency" }, log.max_concurrency.toFixed(2)),
    `x requests of ${fmt(log.max_model_len)} tokens`));
  if (doc.request_lengths.length) {
    const table = el("table", { "data-field": "concurrency" },
      el("tr", {}, el("th", {}, "request length"), el("th", {}, "requests at once (vLLM's max concurrency)")));
    for (const r of doc.request_lengths) {
      table.append(el("tr", { "data-length": r.request_length }, el("td", {}, fmt(r.request_length)),
        el("td", { "data-field": "requests" }, r.max_concurrency.toFixed(2))));
    }
    card.append(table);
  }
  const stage = doc.budget.stages[doc.budget.limiting_stage || 0];
  if (stage && doc.budget.total_bytes) {
    const rows = [
      { label: "weights", bytes: stage.weights_bytes, kind: "weights" },
      { label: "forward activations", bytes: stage.forward_bytes + stage.hidden_states_bytes, kind: "activations" },
      { label: "sampler", bytes: stage.sampler_bytes, kind: "activations" },
      { label: "resident (CUDA context, graphs)", bytes: stage.resident_bytes + stage.multi_gpu_bytes, kind: "overhead" },
      { label: "KV cache", bytes: stage.available_bytes, kind: "kv" },
    ];
    card.append(el("h3", {}, "Where one GPU's memory goes"),
      stackedBar(rows, doc.budget.total_bytes, `one GPU as vLLM reads it (${doc.gpu})`));
  }
  card.append(el("h3", {}, "What vLLM logs"), el("pre", { class: "command" }, log.lines.join("\n")));
  return card;
}

async function plan() {
  const s = state();
  saveState("plan");
  const out = $("answers");
  out.replaceChildren();
  $("fits").replaceChildren();
  const t = performance.now();
  if (s.hf && !s.config) {
    $("status").textContent = `Fetching ${s.hf} from ${hubBase()}...`;
    await fetchHub(s.hf);
  }
  if (s.engine !== "vllm") out.append(renderSglang(s));
  if (s.engine !== "sglang") out.append(renderVllm(s));
  timing.plan_ms = performance.now() - t;
  $("status").textContent = `Planned in ${timing.plan_ms.toFixed(0)} ms.`;
}

function fits() {
  const s = state();
  saveState("fit");
  const argv = ["fit", ...machine(s, !s.gpu), "--count", s.count || "1"];
  const first = s.lengths.split(",").map((x) => x.trim()).filter(Boolean)[0];
  if (first) argv.push("--request-length", first);
  argv.push("--json");
  const result = run(argv);
  const box = $("fits");
  box.replaceChildren(el("h2", {}, "What fits my machine?"), el("p", {}, "Same as ", el("code", {}, shell(argv))));
  $("answers").replaceChildren();
  if (result.rc !== 0) { const card = el("article", { class: "answer" }); refusal(card, result); box.append(card); return; }
  const doc = JSON.parse(result.stdout);
  const table = el("table", { "data-field": "fit-table" }, el("tr", {}, ...["#", "model", "layout", "KV", "tokens",
    "request length", "requests at once", "limited by / why not", ""].map((h) => el("th", { class: "text" }, h))));
  doc.models.forEach((m, i) => {
    const row = el("tr", { "data-model": m.model });
    if (m.fits) {
      const layout = `TP ${m.tp}${m.ep > 1 ? ` EP ${m.ep}` : ""}${m.replicas > 1 ? ` x ${m.replicas}` : ""}`;
      const button = el("button", { type: "button" }, "plan");
      button.addEventListener("click", () => {
        $("model").value = m.model; $("config").value = ""; $("tp").value = m.tp; $("ep").value = m.ep;
        $("kv").value = m.kv_cache_dtype; $("lengths").value = String(m.request_length); plan();
      });
      row.append(el("td", {}, i + 1), el("td", { class: "text" }, m.model), el("td", { class: "text" }, layout),
        el("td", { class: "text" }, m.kv_cache_dtype), el("td", { "data-field": "fit-tokens" }, fmt(m.total_tokens)),
        el("td", {}, fmt(m.request_length)), el("td", { "data-field": "fit-requests" }, fmt(m.total_requests)),
        el("td", { class: "text" }, m.limited_by), el("td", {}, button));
    } else {
      row.append(el("td", {}, i + 1), el("td", { class: "text" }, m.model), el("td", { class: "text" }, "does not fit"),
        el("td", {}, "-"), el("td", {}, "-"), el("td", {}, "-"), el("td", {}, "-"),
        el("td", { class: "text", "data-field": "fit-reason" }, m.reason), el("td", {}));
    }
    table.append(row);
  });
  box.append(table);
  $("status").textContent = `${doc.models.filter((m) => m.fits).length} of ${doc.models.length} shipped models fit; ` +
    `ranked in ${timing.last_ms.toFixed(0)} ms.`;
}

function guarded(action) {
  return async (event) => {
    event?.preventDefault();
    $("status").classList.remove("error");
    try { await action(); }
    catch (error) { $("status").textContent = `Error: ${error.message ?? error}`; $("status").classList.add("error"); }
    finally { timing.done += 1; }
  };
}

async function boot() {
  const t0 = performance.now();
  const [py, meta] = await Promise.all([
    loadPyodide({ indexURL: new URL("./pyodide/", import.meta.url).href }),
    fetch("wheel.json").then((r) => r.json()),
  ]);
  const wheel = await fetch(meta.wheel).then((r) => r.arrayBuffer());
  py.unpackArchive(new Uint8Array(wheel), "wheel");
  pyodide = py;
  py.runPython(`import os; os.environ.update(HF_HUB_CACHE="${HF_CACHE}", HF_HUB_OFFLINE="1")`);
  web = py.pyimport("kvstrategies.cli.web");
  const catalog = JSON.parse(web.catalog());
  const models = $("model");
  for (const [label, names] of [["presets", catalog.presets], ["checkpoints (HF ids)", catalog.checkpoints]]) {
    const group = el("optgroup", { label });
    for (const name of names) group.append(el("option", { value: name }, name));
    models.append(group);
  }
  $("gpu").append(el("option", { value: "" }, "(memory by hand)"));
  for (const g of catalog.gpus) $("gpu").append(el("option", { value: g.name }, `${g.name} (${fmt(g.capacity_mib)} MiB)`));
  for (const r of [...catalog.sglang_releases].reverse()) $("release").append(el("option", { value: r }, r));
  for (const r of [...catalog.vllm_releases].reverse()) $("vllm_release").append(el("option", { value: r }, r));
  $("version").textContent = py.runPython("import kvstrategies; kvstrategies.__version__");
  $("pyodide-version").textContent = meta.pyodide;
  const params = new URLSearchParams(location.search);
  setState(params);
  if (!params.has("release")) $("release").value = catalog.sglang_releases.at(-1);
  if (!params.has("vllm_release")) $("vllm_release").value = catalog.vllm_releases.at(-1);
  timing.load_ms = performance.now() - t0;
  $("status").textContent = `Ready in ${(timing.load_ms / 1000).toFixed(1)} s.`;
  $("plan").disabled = false;
  $("fit").disabled = false;
  $("form").addEventListener("submit", guarded(plan));
  $("fit").addEventListener("click", guarded(fits));
  const view = params.get("view");
  if (view === "fit") await guarded(fits)();
  else if (view === "plan") await guarded(plan)();
  timing.first_answer_ms = performance.now() - t0;
  document.body.dataset.ready = "true";
}

boot().catch((error) => {
  $("status").textContent = `Could not start: ${error}`;
  $("status").classList.add("error");
  document.body.dataset.ready = "error";
});
