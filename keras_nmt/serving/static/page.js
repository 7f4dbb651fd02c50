// The page at /: translate with POST translate, models from GET models. Text is always
// set with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let models = [];

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function chosenModel() {
  return models[Number($("model").value)] || models[0];
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function loadModels() {
  const answer = await fetch("models");
  models = (await answer.json()).models;
  for (const [index, m] of models.entries()) {
    const option = element("option", "", `${m.name} ${m.version} (${m.src} → ${m.tgt})`);
    option.value = String(index);
    $("model").append(option);
  }
  modelChanged();
}

function modelChanged() {
  const m = chosenModel();
  if (!m) return;
  $("beam").value = m.beam;
  $("nbest").max = m.max_nbest;
  $("nbest").value = Math.min(Number($("nbest").value) || 1, m.max_nbest);
}

function render(sources, answer) {
  const results = $("results");
  results.replaceChildren();
  answer.translations.forEach((t, i) => {
    const box = element("div", "sentence");
    box.append(element("p", "source", sources[i]), element("p", "best", t.text));
    const table = element("table", "nbest");
    const head = table.createTHead().insertRow();
    for (const title of ["#", "translation", "score"]) head.append(element("th", "", title));
    const body = table.createTBody();
    t.nbest.forEach((h, rank) => {
      const row = body.insertRow();
      row.append(element("td", "rank", String(rank + 1)), element("td", "hyp", h.text),
                 element("td", "score", h.score.toFixed(4)));
    });
    box.append(table);
    if (t.truncated > 0) {
      box.append(element("p", "note", `${t.truncated} source tokens beyond the model's limit were dropped.`));
    }
    results.append(box);
  });
  results.append(element("p", "note",
    "Alignment: this export's ONNX model returns no attention weights, so no heat map is shown."));
}

async function translate(event) {
  event.preventDefault();
  const sources = $("text").value.split("\n").filter((line) => line.trim());
  if (!sources.length) return;
  const m = chosenModel();
  const request = {text: sources, beam: Number($("beam").value), nbest: Number($("nbest").value)};
  if (m) Object.assign(request, {model: m.name, version: m.version});
  setStatus("translating…", false);
  $("translate").disabled = true;
  try {
    const answer = await fetch("translate", {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(request),
    });
    const body = await answer.json();
    if (!answer.ok) {
      setStatus(body.error || `HTTP ${answer.status}`, true);
      return;
    }
    render(sources, body);
    setStatus("", false);
  } catch (error) {
    setStatus(String(error), true);
  } finally {
    $("translate").disabled = false;
  }
}

$("form").addEventListener("submit", translate);
$("model").addEventListener("change", modelChanged);
loadModels().catch((error) => setStatus(String(error), true));
