// leader-eval report: filters, sorting and lazily rendered samples. Every string from a run is
// inserted with textContent (never innerHTML), so an output can never become markup.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var cache = {};
  function data(run) {
    if (!(run in cache)) {
      var node = document.getElementById("data-run-" + run);
      cache[run] = node ? JSON.parse(node.textContent) : { cases: {} };
    }
    return cache[run];
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var KIND = { tok: "tok", ws: "ws", ctl: "ctl", bad: "bad-byte" };
  function segs(parent, list) {
    for (var i = 0; i < list.length; i++) {
      var s = list[i];
      if (typeof s === "string") { parent.appendChild(document.createTextNode(s)); continue; }
      if (s[0] === "leak") {
        var m = el("mark", "leak");
        m.title = "leak: " + s[1];
        segs(m, s[2]);
        m.appendChild(el("span", "leak-name", s[1]));
        parent.appendChild(m);
        continue;
      }
      var sp = el("span", KIND[s[0]] || "", s[1]);
      if (s[0] === "tok") sp.title = "special token";
      else if (s[0] === "bad") sp.title = "invalid UTF-8 byte";
      else if (s[0] === "ctl") sp.title = "invisible or control character";
      parent.appendChild(sp);
    }
  }
  function pre(cls, list) { var p = el("pre", cls); segs(p, list); return p; }
  function calls(parent, title, list) {
    if (!list || !list.length) return;
    parent.appendChild(el("div", "label", title));
    list.forEach(function (c) { parent.appendChild(el("pre", "json", c.n + "(" + c.a + ")")); });
  }
  function failed(parent, list) {
    if (!list || !list.length) return;
    var ul = el("ul", "checks");
    list.forEach(function (c) {
      var li = el("li");
      li.appendChild(el("span", "bad", "✗ " + c.c));
      li.appendChild(document.createTextNode(": "));
      li.appendChild(el("span", "reason", c.r + (c.h ? " [hard]" : "")));
      if (c.d) li.appendChild(document.createTextNode(" " + c.d));
      c.f.forEach(function (f) {
        var d = el("div", "finding");
        d.appendChild(document.createTextNode(f.r + " at " + f.w + ": "));
        var code = el("code"); segs(code, f.t); d.appendChild(code);
        li.appendChild(d);
      });
      ul.appendChild(li);
    });
    parent.appendChild(ul);
  }
  function sample(s, runLabel) {
    var cls = s.p === true ? "pass" : s.p === false ? "fail" : "other";
    var box = el("div", "sample " + cls);
    var head = el("div", "shead");
    var verdict = s.p === true ? "PASS" : s.p === false ? "FAIL " + (s.r || "") + (s.h ? " (hard)" : "") : s.o;
    head.appendChild(el("b", null, (runLabel ? runLabel + " " : "") + "#" + s.i + " " + verdict));
    head.appendChild(document.createTextNode("  seed " + s.seed + " · outcome " + s.o + " · stop " + s.stop + " · " + s.ct + " tokens"));
    box.appendChild(head);
    if (s.err) box.appendChild(el("div", "warn", "sampler error: " + s.err));
    box.appendChild(pre("raw", s.seg));
    if (s.more) box.appendChild(el("div", "note", "… " + s.more + " more characters not shown (leader-eval show prints them)"));
    if (s.reas) { box.appendChild(el("div", "label", "reasoning channel")); box.appendChild(pre("raw", s.reas)); }
    calls(box, "parsed calls", s.calls);
    calls(box, "lenient reading only (diagnostic)", s.len);
    if (s.api) { box.appendChild(el("div", "label", "API tool_calls")); box.appendChild(el("pre", "json", s.api)); }
    if (s.other && s.other.length) box.appendChild(el("div", "note", "other protocols seen: " + s.other.join(", ")));
    failed(box, s.fail);
    if (s.steps && s.steps.length) {
      var det = el("details", "steps"); det.open = true;
      det.appendChild(el("summary", null, "episode transcript (" + s.steps.length + " steps)"));
      s.steps.forEach(function (st, k) {
        var d = el("div", "step");
        d.appendChild(el("div", "shead", "step " + (k + 1) + " · " + st.h));
        if (st.prompt) {
          var pd = el("details", "prompt");
          pd.appendChild(el("summary", null, "prompt at this step" +
            (st.prompt_omitted ? " (" + st.prompt_omitted + " characters omitted in the middle)" : "")));
          pd.appendChild(pre("prompt", st.prompt));
          d.appendChild(pd);
        }
        if (st.seg) d.appendChild(pre("raw", st.seg));
        if (st.err) d.appendChild(el("div", "warn", "error: " + st.err));
        (st.res || []).forEach(function (r) { d.appendChild(el("pre", "json", "call: " + r)); });
        if (st.rest_calls) d.appendChild(el("pre", "json", st.rest_calls));
        failed(d, st.fail);
        if (st.rest) d.appendChild(el("pre", "json", st.rest));
        det.appendChild(d);
      });
      box.appendChild(det);
    }
    return box;
  }
  function caseSamples(run, cid, runLabel, withPrompt) {
    var frag = document.createDocumentFragment();
    var rec = data(run).cases[cid];
    if (!rec) { frag.appendChild(el("p", "note", "no samples embedded for this case")); return frag; }
    if (withPrompt && rec.prompt) {
      var det = el("details", "prompt");
      det.appendChild(el("summary", null, "rendered prompt" + (rec.prompt_tokens ? " (" + rec.prompt_tokens + " tokens)" : "") +
        (rec.prompt_omitted ? ", " + rec.prompt_omitted + " characters omitted in the middle" : "")));
      det.appendChild(pre("prompt", rec.prompt));
      frag.appendChild(det);
    }
    rec.s.forEach(function (s) { frag.appendChild(sample(s, runLabel)); });
    return frag;
  }
  // case tables: expand, filter, sort
  document.querySelectorAll("table.cases").forEach(function (table) {
    var run = table.getAttribute("data-run");
    var tbody = table.tBodies[0];
    var filters = document.querySelector('.filters[data-run="' + run + '"]');
    function pairs() {
      var rows = Array.prototype.slice.call(tbody.rows), out = [];
      for (var i = 0; i < rows.length; i += 2) out.push([rows[i], rows[i + 1]]);
      return out;
    }
    tbody.addEventListener("click", function (ev) {
      var btn = ev.target.closest("button.case-toggle");
      if (!btn) return;
      var row = btn.closest("tr"), detail = row.nextElementSibling, box = detail.querySelector(".samples");
      if (!box.hasChildNodes()) box.appendChild(caseSamples(run, box.getAttribute("data-case"), "", true));
      detail.hidden = !detail.hidden;
      btn.textContent = detail.hidden ? "▸" : "▾";
      btn.setAttribute("aria-expanded", String(!detail.hidden));
    });
    function apply() {
      var reason = filters.querySelector(".f-reason").value, tag = filters.querySelector(".f-tag").value;
      var status = filters.querySelector(".f-status").value, text = filters.querySelector(".f-text").value.toLowerCase();
      var shown = 0, all = pairs();
      all.forEach(function (p) {
        var r = p[0], ok = true;
        if (reason && r.getAttribute("data-reasons").split(" ").indexOf(reason) < 0) ok = false;
        if (tag && r.getAttribute("data-tags").split(" ").indexOf(tag) < 0) ok = false;
        if (status && r.getAttribute("data-status") !== status) ok = false;
        if (text && r.getAttribute("data-id").toLowerCase().indexOf(text) < 0) ok = false;
        r.hidden = !ok;
        if (!ok) p[1].hidden = true;
        else if (r.querySelector("button.case-toggle").getAttribute("aria-expanded") === "true") p[1].hidden = false;
        if (ok) shown++;
      });
      filters.querySelector(".shown").textContent = shown + " of " + all.length + " cases shown";
    }
    if (filters) {
      filters.addEventListener("input", apply);
      filters.addEventListener("change", apply);
      apply();
    }
    table.tHead.addEventListener("click", function (ev) {
      var th = ev.target.closest("th.sortable");
      if (!th) return;
      var key = th.getAttribute("data-key"), numeric = th.getAttribute("data-type") === "n";
      var dir = th.classList.contains("asc") ? -1 : 1;
      table.tHead.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(dir === 1 ? "asc" : "desc");
      var all = pairs();
      all.sort(function (x, y) {
        var a = x[0].getAttribute("data-" + key), b = y[0].getAttribute("data-" + key);
        if (numeric) return dir * (parseFloat(a) - parseFloat(b));
        return dir * a.localeCompare(b);
      });
      all.forEach(function (p) { tbody.appendChild(p[0]); tbody.appendChild(p[1]); });
    });
  });
  // flipped cases: both sides' samples next to each other, rendered when opened
  document.querySelectorAll("details.flip").forEach(function (d) {
    d.addEventListener("toggle", function () {
      var box = d.querySelector(".sbs");
      if (!d.open || box.hasChildNodes()) return;
      var cid = d.getAttribute("data-case");
      [["a", "an"], ["b", "bn"]].forEach(function (side) {
        var col = el("div", "side");
        col.appendChild(el("h5", null, d.getAttribute("data-" + side[1])));
        d.getAttribute("data-" + side[0]).split(",").forEach(function (run) {
          col.appendChild(caseSamples(run, cid, data(run).name || "run " + run, false));
        });
        box.appendChild(col);
      });
    });
  });
})();
