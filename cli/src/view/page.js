// The causeway run view. Everything is computed once from the embedded report (indices into
// flat arrays), then each step applies or undoes one event's precomputed changes, so stepping
// costs the same at op 10 as at op 10^4. Canvases draw only what lies in their viewport.
"use strict";
(function () {
  const started = performance.now();
  const report = JSON.parse(document.getElementById("report").textContent);
  const ops = report.ops;
  const nOps = ops.length;
  const $ = (id) => document.getElementById(id);
  // "failed": a wait on a value that had already failed (the report's stats count it apart).
  const RESOLUTIONS = ["elided", "satisfied", "device", "held", "failed"];
  const TABLE_ROWS = 60;
  const LOG_ROWS = 60;
  // Drawn names kept in `view.drawn`, per canvas.
  const DRAWN_LISTED = 2000;

  // ---- Indices -------------------------------------------------------------------------------

  // Lanes: the report's queues in order, then any other target (the host) in order of use.
  const laneNames = report.queues.map((queue) => queue.name);
  const laneOfName = new Map(laneNames.map((name, index) => [name, index]));
  for (const op of ops) {
    if (!laneOfName.has(op.queue)) {
      laneOfName.set(op.queue, laneNames.length);
      laneNames.push(op.queue);
    }
  }
  const laneDriver = laneNames.map((name, index) =>
    index < report.queues.length ? report.queues[index].driver : name);
  const lane = Int32Array.from(ops, (op) => laneOfName.get(op.queue));
  const opsOfLane = laneNames.map(() => []);
  ops.forEach((op, index) => opsOfLane[lane[index]].push(index));
  const opByName = new Map();
  ops.forEach((op, index) => { if (!opByName.has(op.name)) opByName.set(op.name, index); });

  const semaphores = report.semaphores;
  // A stopped run's waits not reached at its deadline, by op name.
  const pendingOf = new Map();
  for (const wait of (report.timed_out && report.timed_out.pending_waits) || []) {
    if (!pendingOf.has(wait.op)) pendingOf.set(wait.op, []);
    pendingOf.get(wait.op).push(wait);
  }
  const semaphoreOfName = new Map(semaphores.map((s, index) => [s.name, index]));

  // The signaller of a wait `s >= v` is the first op in file order whose signal on s reaches v
  // (the rule the Perfetto trace's flow arrows follow): a running maximum per semaphore, searched.
  const raised = semaphores.map(() => ({ values: [], ops: [] }));
  ops.forEach((op, index) => {
    for (const signal of op.signals || []) {
      const s = semaphoreOfName.get(signal.semaphore);
      if (s === undefined) continue;
      const list = raised[s];
      const last = list.values.length ? list.values[list.values.length - 1] : 0;
      if (signal.value > last) {
        list.values.push(signal.value);
        list.ops.push(index);
      }
    }
  });
  function signaller(semaphore, value) {
    const s = semaphoreOfName.get(semaphore);
    if (s === undefined) return -1;
    const { values, ops: by } = raised[s];
    let low = 0;
    let high = values.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (values[mid] >= value) high = mid; else low = mid + 1;
    }
    return low < values.length ? by[low] : -1;
  }

  // Waits, flattened: wait w of op i lies at waitStart[i] + w.
  const waitStart = new Int32Array(nOps + 1);
  ops.forEach((op, index) => { waitStart[index + 1] = waitStart[index] + op.waits.length; });
  const nWaits = waitStart[nOps];
  const waitFrom = new Int32Array(nWaits);
  const waitResolution = new Int8Array(nWaits);
  const waitTainted = new Uint8Array(nWaits);
  const waitOwner = new Int32Array(nWaits);
  ops.forEach((op, index) => {
    op.waits.forEach((wait, w) => {
      const at = waitStart[index] + w;
      const from = signaller(wait.semaphore, wait.value);
      waitFrom[at] = from === index ? -1 : from;
      waitResolution[at] = Math.max(0, RESOLUTIONS.indexOf(wait.resolution));
      waitTainted[at] = wait.tainted ? 1 : 0;
      waitOwner[at] = index;
    });
  });
  // Outgoing edges (signal to wait), compressed by source op.
  const outStart = new Int32Array(nOps + 1);
  for (let w = 0; w < nWaits; w++) if (waitFrom[w] >= 0) outStart[waitFrom[w] + 1]++;
  for (let i = 0; i < nOps; i++) outStart[i + 1] += outStart[i];
  const outWait = new Int32Array(outStart[nOps]);
  {
    const fill = outStart.slice(0, nOps);
    for (let w = 0; w < nWaits; w++) if (waitFrom[w] >= 0) outWait[fill[waitFrom[w]]++] = w;
  }

  // Graph columns: longest path over lane order and signal edges (Kahn's algorithm).
  const depth = new Int32Array(nOps);
  {
    const indegree = new Int32Array(nOps);
    const laneNext = new Int32Array(nOps).fill(-1);
    for (const list of opsOfLane) {
      for (let k = 1; k < list.length; k++) { laneNext[list[k - 1]] = list[k]; indegree[list[k]]++; }
    }
    for (let w = 0; w < nWaits; w++) if (waitFrom[w] >= 0) indegree[waitOwner[w]]++;
    const ready = [];
    for (let i = 0; i < nOps; i++) if (indegree[i] === 0) ready.push(i);
    const placed = new Uint8Array(nOps);
    const relax = (from, to) => {
      depth[to] = Math.max(depth[to], depth[from] + 1);
      if (--indegree[to] === 0) ready.push(to);
    };
    for (let head = 0; head < ready.length; head++) {
      const i = ready[head];
      placed[i] = 1;
      if (laneNext[i] >= 0) relax(i, laneNext[i]);
      for (let e = outStart[i]; e < outStart[i + 1]; e++) relax(i, waitOwner[outWait[e]]);
    }
    // A run cut short can leave a cycle of never-run ops: they go after everything else.
    let next = 0;
    for (let i = 0; i < nOps; i++) next = Math.max(next, depth[i] + 1);
    for (let i = 0; i < nOps; i++) if (!placed[i]) depth[i] = next++;
  }
  const lanePrevious = new Int32Array(nOps).fill(-1);
  const laneFollowing = new Int32Array(nOps).fill(-1);
  for (const list of opsOfLane) {
    for (let k = 1; k < list.length; k++) {
      lanePrevious[list[k]] = list[k - 1];
      laneFollowing[list[k - 1]] = list[k];
    }
  }
  let columns = 0;
  for (let i = 0; i < nOps; i++) columns = Math.max(columns, depth[i] + 1);
  const columnStart = new Int32Array(columns + 1);
  for (let i = 0; i < nOps; i++) columnStart[depth[i] + 1]++;
  for (let c = 0; c < columns; c++) columnStart[c + 1] += columnStart[c];
  const columnOps = new Int32Array(nOps);
  {
    const fill = columnStart.slice(0, columns);
    for (let i = 0; i < nOps; i++) columnOps[fill[depth[i]]++] = i;
  }

  // A run stopped at its deadline (report.timed_out) has ops that never started, which have no
  // events, and ops still running then, which start and never end (their end_ns is the
  // deadline).
  const timedOut = report.timed_out || null;
  const hasStarted = (op) => op.status !== "not_started";
  const hasEnded = (op) => hasStarted(op) && op.status !== "running";

  // Events: op i's start is event 2i and its end 2i + 1 (each op has both but in a stopped
  // run); ends sort before starts at the same instant (a start at t may rest on an end at t).
  // Semaphore changes are precomputed so a step is O(its signals).
  const eventCodes = [];
  ops.forEach((op, index) => {
    if (hasStarted(op)) eventCodes.push(2 * index);
    if (hasEnded(op)) eventCodes.push(2 * index + 1);
  });
  const nEvents = eventCodes.length;
  const eventOrder = Int32Array.from(eventCodes);
  const eventTime = (e) => (e & 1 ? ops[e >> 1].end_ns : ops[e >> 1].start_ns);
  eventOrder.sort((a, b) => eventTime(a) - eventTime(b) || (b & 1) - (a & 1) || a - b);
  const eventOp = (step) => eventOrder[step] >> 1;
  const eventIsEnd = (step) => (eventOrder[step] & 1) === 1;
  const changeStart = new Int32Array(nEvents + 1);
  const changeSemaphore = [];
  const changeBefore = [];
  const changeAfter = [];
  {
    const value = new Float64Array(semaphores.length);
    for (let step = 0; step < nEvents; step++) {
      const op = ops[eventOp(step)];
      if (eventIsEnd(step) && op.status === "ok") {
        for (const signal of op.signals || []) {
          const s = semaphoreOfName.get(signal.semaphore);
          if (s === undefined || signal.value <= value[s]) continue;
          changeSemaphore.push(s);
          changeBefore.push(value[s]);
          changeAfter.push(signal.value);
          value[s] = signal.value;
        }
      }
      changeStart[step + 1] = changeSemaphore.length;
    }
  }
  let timeStart = Infinity;
  let timeEnd = timedOut ? timedOut.at_ns : 0;
  for (const op of ops) {
    if (!hasStarted(op)) continue;
    timeStart = Math.min(timeStart, op.start_ns);
    timeEnd = Math.max(timeEnd, op.end_ns);
  }
  if (!isFinite(timeStart)) timeStart = 0;
  const timeSpan = Math.max(1, timeEnd - timeStart);

  // ---- Formatting ----------------------------------------------------------------------------

  const escapeHtml = (text) => String(text).replace(/[&<>"]/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const frontierText = (frontier) => frontier.map((p) => `${p.axis}=${p.epoch}`).join(",");
  const frontierHtml = (frontier, tainted) =>
    `<span class="frontier">{${escapeHtml(frontier.map((p) => `${p.axis}:${p.epoch}`).join(", "))}}</span>` +
    (tainted ? ' <span class="tainted" title="an untracked signal entered this frontier">tainted</span>' : "");
  const micros = (ns) => `${((ns - timeStart) / 1000).toFixed(1)} µs`;
  function eventText(step) {
    const i = eventOp(step);
    const op = ops[i];
    if (!eventIsEnd(step)) return `${micros(op.start_ns)}  start ${op.name} on ${op.queue}`;
    const verb = op.status === "ok" ? "end" : op.status;
    const signals = (op.signals || []).map((s) => `${s.semaphore}=${s.value}`).join(" ");
    return `${micros(op.end_ns)}  ${verb} ${op.name} on ${op.queue}${signals && op.status === "ok" ? "  signals " + signals : ""}`;
  }

  // ---- State ---------------------------------------------------------------------------------

  const view = {
    step: 0,
    selected: -1,
    filter: "",
    matches: new Uint8Array(nOps).fill(1),
    matchCount: nOps,
    semaphoreValue: new Float64Array(semaphores.length),
    opState: new Int8Array(nOps), // 0 pending, 1 running, 2 ended
    zoom: 1,
    axis: "linear", // or "compressed"
    // The names drawn in the last frame, as drawn (cut to fit), for the browser tier.
    drawn: { lanes: [], dag: [] },
    timings: { firstPaintMs: 0, stepMs: [] },
  };
  window.causewayView = view;

  function applyForward(step) {
    const e = eventOrder[step];
    view.opState[e >> 1] = e & 1 ? 2 : 1;
    if (e & 1) running.delete(e >> 1); else running.add(e >> 1);
    for (let c = changeStart[step]; c < changeStart[step + 1]; c++) {
      view.semaphoreValue[changeSemaphore[c]] = changeAfter[c];
    }
  }
  function applyBackward(step) {
    const e = eventOrder[step];
    view.opState[e >> 1] = e & 1 ? 1 : 0;
    if (e & 1) running.add(e >> 1); else running.delete(e >> 1);
    for (let c = changeStart[step + 1] - 1; c >= changeStart[step]; c--) {
      view.semaphoreValue[changeSemaphore[c]] = changeBefore[c];
    }
  }
  function goTo(target) {
    const begun = performance.now();
    target = Math.max(0, Math.min(nEvents, target));
    while (view.step < target) applyForward(view.step++);
    while (view.step > target) applyBackward(--view.step);
    renderStep();
    const timings = view.timings.stepMs;
    timings.push(performance.now() - begun);
    if (timings.length > 4096) timings.splice(0, timings.length - 4096);
  }

  // ---- Colours -------------------------------------------------------------------------------

  let colours = {};
  function readColours() {
    const style = getComputedStyle(document.documentElement);
    for (const name of ["bg", "fg", "muted", "line", "accent", "running", "done", "pending", "failed",
      "cancelled", "elided", "satisfied", "device", "held", "tainted", "future", "cursor", "panel"]) {
      colours[name] = style.getPropertyValue(`--${name}`).trim();
    }
  }
  const statusColour = (op) => (op.status === "ok" ? colours.done : op.status === "failed" ? colours.failed
    : op.status === "running" ? colours.running : colours.cancelled);

  // ---- Canvases ------------------------------------------------------------------------------

  function fitCanvas(canvas, scroll, width, height) {
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.min(scroll.clientWidth, width));
    const h = Math.max(1, Math.min(scroll.clientHeight || height, height));
    if (canvas.width !== Math.round(w * ratio) || canvas.height !== Math.round(h * ratio)) {
      canvas.width = Math.round(w * ratio);
      canvas.height = Math.round(h * ratio);
      canvas.style.width = `${w}px`;
      canvas.style.height = `${h}px`;
    }
    const context = canvas.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    return { context, w, h };
  }

  // Text cut to `width` pixels with an ellipsis ("" when not even one character fits): a
  // binary search over the prefixes, so a long name costs a few measurements.
  function fitText(g, text, width) {
    if (g.measureText(text).width <= width) return text;
    let low = 0;
    let high = text.length;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (g.measureText(text.slice(0, mid) + "…").width <= width) low = mid; else high = mid - 1;
    }
    return low > 0 ? text.slice(0, low) + "…" : "";
  }

  // Lanes: a row per queue, ops as bars over time, a cursor at the current event. Time runs
  // along one of two axes: linear, or compressed — each stretch between two consecutive
  // instants of the run (a start, an end, the deadline) takes 1 + log2(1 + its length / the
  // median stretch) units, so short ops beside one that spans the run (a first Vulkan
  // dispatch, say) stay wide enough to see and to label.
  const LANE_H = 22;
  const LABEL_W = 110;
  // Bars narrower than this carry no name.
  const BAR_LABEL_MIN_W = 24;
  const instants = [];
  for (const op of ops) if (hasStarted(op)) instants.push(op.start_ns, op.end_ns);
  if (timedOut) instants.push(timedOut.at_ns);
  const sortedInstants = Float64Array.from(instants).sort();
  let distinct = 0;
  for (let k = 0; k < sortedInstants.length; k++) {
    if (distinct === 0 || sortedInstants[k] !== sortedInstants[distinct - 1]) sortedInstants[distinct++] = sortedInstants[k];
  }
  const axisTimes = sortedInstants.subarray(0, distinct);
  const axisCompressed = new Float64Array(distinct);
  {
    const gaps = new Float64Array(Math.max(0, distinct - 1));
    for (let k = 1; k < distinct; k++) gaps[k - 1] = axisTimes[k] - axisTimes[k - 1];
    const quantum = gaps.length ? Math.max(1, gaps.slice().sort()[gaps.length >> 1]) : 1;
    for (let k = 1; k < distinct; k++) axisCompressed[k] = axisCompressed[k - 1] + 1 + Math.log2(1 + gaps[k - 1] / quantum);
  }
  // Where `ns` lies on the compressed axis: between the instants around it, linearly.
  function compressedUnit(ns) {
    if (distinct === 0) return 0;
    let low = 0;
    let high = distinct - 1;
    if (ns <= axisTimes[0]) return 0;
    if (ns >= axisTimes[high]) return axisCompressed[high];
    while (high - low > 1) {
      const mid = (low + high) >> 1;
      if (axisTimes[mid] <= ns) low = mid; else high = mid;
    }
    const part = (ns - axisTimes[low]) / (axisTimes[high] - axisTimes[low]);
    return axisCompressed[low] + part * (axisCompressed[high] - axisCompressed[low]);
  }
  const axes = {
    linear: { span: timeSpan, unit: (ns) => ns - timeStart, ops: null },
    compressed: { span: Math.max(1, distinct ? axisCompressed[distinct - 1] : 0), unit: compressedUnit, ops: null },
  };
  // Each op's start and end on `axis` (2i, 2i + 1), computed once per axis.
  function opUnits(axis) {
    if (!axis.ops) {
      axis.ops = new Float64Array(2 * nOps);
      ops.forEach((op, i) => {
        if (!hasStarted(op)) return;
        axis.ops[2 * i] = axis.unit(op.start_ns);
        axis.ops[2 * i + 1] = axis.unit(op.end_ns);
      });
    }
    return axis.ops;
  }
  const lanesScroll = $("lanes-scroll");
  const lanesCanvas = $("lanes");
  const lanesSize = $("lanes-size");
  const lanesHeight = laneNames.length * LANE_H + 18;
  const lanesScale = () => (Math.max(200, lanesScroll.clientWidth - LABEL_W - 8) * view.zoom) / axes[view.axis].span;
  // The bars (coloured by how each op ended), the selection and the labels are drawn into a
  // base layer only when the view moves, zooms, changes axis, filters, selects or changes
  // theme; a step copies it and draws the cursor, the not-yet-happened shade and the running
  // ops on top.
  const lanesBase = document.createElement("canvas");
  let lanesBaseKey = "";
  const running = new Set();
  function drawLanesBase(g, w, h, at, top) {
    g.fillStyle = colours.bg;
    g.fillRect(0, 0, w, h);
    const firstLane = Math.max(0, Math.floor(top / LANE_H));
    const lastLane = Math.min(laneNames.length - 1, Math.ceil((top + h) / LANE_H));
    g.font = "11px sans-serif";
    const units = opUnits(axes[view.axis]);
    view.drawn.lanes = [];
    for (let l = firstLane; l <= lastLane; l++) {
      const y = l * LANE_H - top;
      g.fillStyle = l & 1 ? colours.panel : colours.bg;
      g.fillRect(LABEL_W, y, w - LABEL_W, LANE_H);
      for (const i of opsOfLane[l]) {
        const op = ops[i];
        if (!hasStarted(op)) continue;
        const x0 = at(units[2 * i]);
        const x1 = Math.max(x0 + 2, at(units[2 * i + 1]));
        if (x1 < LABEL_W || x0 > w) continue;
        g.globalAlpha = view.matches[i] ? 1 : 0.15;
        g.fillStyle = statusColour(op);
        g.fillRect(x0, y + 3, x1 - x0, LANE_H - 6);
        if (op.tainted) {
          g.fillStyle = colours.tainted;
          g.fillRect(x0, y + LANE_H - 5, x1 - x0, 2);
        }
        if (x1 - x0 >= BAR_LABEL_MIN_W) {
          const text = fitText(g, op.name, x1 - x0 - 6);
          if (text) {
            g.fillStyle = colours.bg;
            g.fillText(text, x0 + 3, y + 15);
            if (view.drawn.lanes.length < DRAWN_LISTED) {
              view.drawn.lanes.push({ name: op.name, text, width: x1 - x0, textWidth: g.measureText(text).width,
                x: (x0 + x1) / 2, y: y + LANE_H / 2 });
            }
          }
        }
      }
      g.globalAlpha = 1;
    }
    if (view.selected >= 0 && hasStarted(ops[view.selected])) {
      const i = view.selected;
      g.strokeStyle = colours.accent;
      g.lineWidth = 2;
      const x0 = at(units[2 * i]);
      g.strokeRect(x0 - 1, lane[i] * LANE_H - top + 1, Math.max(4, at(units[2 * i + 1]) - x0 + 2), LANE_H - 2);
    }
  }
  function drawLaneLabels(g, h, top) {
    g.fillStyle = colours.panel;
    g.fillRect(0, 0, LABEL_W, h);
    g.fillStyle = colours.fg;
    g.font = "12px sans-serif";
    const firstLane = Math.max(0, Math.floor(top / LANE_H));
    const lastLane = Math.min(laneNames.length - 1, Math.ceil((top + h) / LANE_H));
    for (let l = firstLane; l <= lastLane; l++) {
      const label = laneDriver[l] === laneNames[l] ? laneNames[l] : `${laneNames[l]} (${laneDriver[l]})`;
      g.fillText(fitText(g, label, LABEL_W - 8), 4, l * LANE_H - top + 15);
    }
  }
  let filterVersion = 0;
  function drawLanes() {
    const scale = lanesScale();
    const axis = axes[view.axis];
    const totalWidth = LABEL_W + axis.span * scale + 8;
    lanesSize.style.width = `${totalWidth}px`;
    lanesSize.style.height = `${lanesHeight}px`;
    lanesScroll.style.height = `${Math.min(320, lanesHeight + 18)}px`;
    const { context: g, w, h } = fitCanvas(lanesCanvas, lanesScroll, totalWidth, lanesHeight);
    const left = lanesScroll.scrollLeft;
    const top = lanesScroll.scrollTop;
    // A position on the axis, and an instant, as x on the canvas.
    const at = (unit) => LABEL_W + unit * scale - left;
    const x = (ns) => at(axis.unit(ns));
    const key = [lanesCanvas.width, lanesCanvas.height, left, top, scale, view.axis, filterVersion,
      view.selected, document.documentElement.dataset.theme].join();
    if (key !== lanesBaseKey) {
      lanesBase.width = lanesCanvas.width;
      lanesBase.height = lanesCanvas.height;
      const base = lanesBase.getContext("2d");
      const ratio = window.devicePixelRatio || 1;
      base.setTransform(ratio, 0, 0, ratio, 0, 0);
      drawLanesBase(base, w, h, at, top);
      lanesBaseKey = key;
    }
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.drawImage(lanesBase, 0, 0);
    const ratio = window.devicePixelRatio || 1;
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    // The cursor: the instant of the current event; what lies right of it has not happened.
    const cursor = view.step > 0 ? x(eventTime(eventOrder[view.step - 1])) : LABEL_W;
    g.fillStyle = colours.future;
    g.fillRect(Math.max(LABEL_W, cursor), 0, w, h);
    g.fillStyle = colours.running;
    const units = opUnits(axis);
    for (const i of running) {
      const x0 = at(units[2 * i]);
      const x1 = Math.max(x0 + 2, at(units[2 * i + 1]));
      if (x1 >= LABEL_W && x0 <= w) g.fillRect(x0, lane[i] * LANE_H - top + 3, x1 - x0, LANE_H - 6);
    }
    g.strokeStyle = colours.cursor;
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(cursor, 0);
    g.lineTo(cursor, h);
    g.stroke();
    if (timedOut) {
      // Where the run was stopped: work right of it never happened.
      const deadline = x(timedOut.at_ns);
      g.setLineDash([4, 3]);
      g.strokeStyle = colours.failed;
      g.lineWidth = 2;
      g.beginPath();
      g.moveTo(deadline, 0);
      g.lineTo(deadline, h);
      g.stroke();
      g.setLineDash([]);
      g.fillStyle = colours.failed;
      g.font = "11px sans-serif";
      g.textAlign = "right";
      g.fillText("deadline", deadline - 3, h - 4);
      g.textAlign = "start";
    }
    drawLaneLabels(g, h, top);
  }
  function laneHit(event) {
    const box = lanesCanvas.getBoundingClientRect();
    const px = event.clientX - box.left;
    const l = Math.floor((event.clientY - box.top + lanesScroll.scrollTop) / LANE_H);
    if (px < LABEL_W || l < 0 || l >= laneNames.length) return -1;
    const scale = lanesScale();
    const units = opUnits(axes[view.axis]);
    const u = (px - LABEL_W + lanesScroll.scrollLeft) / scale;
    const slack = 3 / scale;
    let best = -1;
    let bestDistance = Infinity;
    for (const i of opsOfLane[l]) {
      if (!hasStarted(ops[i])) continue;
      const distance = Math.max(0, units[2 * i] - u, u - units[2 * i + 1]);
      if (distance <= slack && distance < bestDistance) { best = i; bestDistance = distance; }
    }
    return best;
  }

  // The graph: a column per depth, a row per lane; edges from each signal to the waits it
  // satisfied, coloured by resolution, dashed when tainted; lane order in thin grey.
  const dagScroll = $("dag-scroll");
  const dagCanvas = $("dag");
  const dagSize = $("dag-size");
  const labelled = nOps <= 2000;
  const COL_W = labelled ? 96 : 26;
  const ROW_H = labelled ? 36 : 18;
  const DAG_LEFT = 90;
  const node = (i) => [DAG_LEFT + depth[i] * COL_W + COL_W / 2, lane[i] * ROW_H + ROW_H / 2 + 4];
  const resolutionColour = (r) => colours[RESOLUTIONS[r]];
  function drawDag() {
    const totalWidth = DAG_LEFT + columns * COL_W + 10;
    const totalHeight = laneNames.length * ROW_H + 10;
    dagSize.style.width = `${totalWidth}px`;
    dagSize.style.height = `${totalHeight}px`;
    dagScroll.style.height = `${Math.min(300, totalHeight + 18)}px`;
    const { context: g, w, h } = fitCanvas(dagCanvas, dagScroll, totalWidth, totalHeight);
    const left = dagScroll.scrollLeft;
    const top = dagScroll.scrollTop;
    g.fillStyle = colours.bg;
    g.fillRect(0, 0, w, h);
    const firstColumn = Math.max(0, Math.floor((left - DAG_LEFT) / COL_W) - 1);
    const lastColumn = Math.min(columns - 1, Math.ceil((left + w - DAG_LEFT) / COL_W) + 1);
    g.save();
    g.translate(-left, -top);
    const edge = (from, to, colour, dashed, width) => {
      const [x0, y0] = node(from);
      const [x1, y1] = node(to);
      g.strokeStyle = colour;
      g.lineWidth = width;
      g.setLineDash(dashed ? [4, 3] : []);
      g.beginPath();
      g.moveTo(x0, y0);
      if (y0 === y1) g.lineTo(x1, y1);
      else g.bezierCurveTo((x0 + x1) / 2, y0, (x0 + x1) / 2, y1, x1, y1);
      g.stroke();
    };
    const visible = [];
    for (let c = firstColumn; c <= lastColumn; c++) {
      for (let k = columnStart[c]; k < columnStart[c + 1]; k++) visible.push(columnOps[k]);
    }
    // Lane order, then signal edges into and out of the visible columns.
    g.globalAlpha = 0.5;
    for (const b of visible) {
      const a = lanePrevious[b];
      if (a >= 0) edge(a, b, colours.line, false, 1);
      const c = laneFollowing[b];
      if (c >= 0 && depth[c] > lastColumn) edge(b, c, colours.line, false, 1);
    }
    for (const i of visible) {
      const highlight = view.selected === i;
      for (let w2 = waitStart[i]; w2 < waitStart[i + 1]; w2++) {
        if (waitFrom[w2] < 0) continue;
        const lit = highlight || view.selected === waitFrom[w2];
        g.globalAlpha = view.matches[i] || view.matches[waitFrom[w2]] ? (lit ? 1 : 0.8) : 0.15;
        edge(waitFrom[w2], i, resolutionColour(waitResolution[w2]), waitTainted[w2] === 1, lit ? 3 : 1.5);
      }
      for (let e = outStart[i]; e < outStart[i + 1]; e++) {
        const to = waitOwner[outWait[e]];
        if (depth[to] >= firstColumn && depth[to] <= lastColumn) continue; // drawn as incoming
        const lit = highlight || view.selected === to;
        g.globalAlpha = view.matches[i] || view.matches[to] ? (lit ? 1 : 0.8) : 0.15;
        edge(i, to, resolutionColour(waitResolution[outWait[e]]), waitTainted[outWait[e]] === 1, lit ? 3 : 1.5);
      }
    }
    g.setLineDash([]);
    view.drawn.dag = [];
    for (const i of visible) {
      const [cx, cy] = node(i);
      if (cy + ROW_H < top || cy - ROW_H > top + h) continue;
      const op = ops[i];
      g.globalAlpha = view.matches[i] ? 1 : 0.15;
      g.fillStyle = view.opState[i] === 1 ? colours.running : view.opState[i] === 2 ? statusColour(op) : colours.pending;
      g.strokeStyle = i === view.selected ? colours.accent : op.tainted ? colours.tainted : colours.fg;
      g.lineWidth = i === view.selected ? 3 : 1;
      if (labelled) {
        g.beginPath();
        g.roundRect(cx - COL_W / 2 + 6, cy - 10, COL_W - 12, 20, 4);
        g.fill();
        g.stroke();
        g.fillStyle = view.opState[i] === 0 ? colours.fg : colours.bg;
        g.font = "11px sans-serif";
        g.textAlign = "center";
        // A long name is cut to its box; hovering the box shows it whole (the title).
        const text = fitText(g, op.name, COL_W - 16);
        g.fillText(text, cx, cy + 4);
        g.textAlign = "start";
        if (view.drawn.dag.length < DRAWN_LISTED) {
          view.drawn.dag.push({ name: op.name, text, x: cx - left, y: cy - top, textWidth: g.measureText(text).width });
        }
      } else {
        g.beginPath();
        g.arc(cx, cy, 5, 0, 2 * Math.PI);
        g.fill();
        g.stroke();
      }
    }
    g.globalAlpha = 1;
    g.restore();
    g.fillStyle = colours.panel;
    g.fillRect(0, 0, DAG_LEFT - 4, h);
    g.fillStyle = colours.fg;
    g.font = "12px sans-serif";
    for (let l = 0; l < laneNames.length; l++) {
      const y = l * ROW_H + ROW_H / 2 + 8 - top;
      if (y > -ROW_H && y < h + ROW_H) g.fillText(fitText(g, laneNames[l], DAG_LEFT - 10), 4, y);
    }
  }
  function dagHit(event) {
    const box = dagCanvas.getBoundingClientRect();
    const px = event.clientX - box.left + dagScroll.scrollLeft;
    const py = event.clientY - box.top + dagScroll.scrollTop;
    const c = Math.floor((px - DAG_LEFT) / COL_W);
    const l = Math.floor((py - 4) / ROW_H);
    if (c < 0 || c >= columns) return -1;
    for (let k = columnStart[c]; k < columnStart[c + 1]; k++) if (lane[columnOps[k]] === l) return columnOps[k];
    return -1;
  }

  // ---- Tables --------------------------------------------------------------------------------

  // An op that never started (the run was stopped at its deadline first) is "not-started"
  // throughout; one still running then stays "running" to the end.
  const stateName = (i) => (!hasStarted(ops[i]) ? "not-started" : view.opState[i] === 0 ? "pending"
    : view.opState[i] === 1 ? "running" : ops[i].status === "ok" ? "done" : ops[i].status);
  // The ops shown: every match when few; else the matches around the current event.
  function shownOps() {
    if (view.matchCount <= TABLE_ROWS) {
      const shown = [];
      for (let i = 0; i < nOps; i++) if (view.matches[i]) shown.push(i);
      return shown;
    }
    const shown = [];
    const seen = new Set();
    let low = Math.max(0, view.step - 1);
    let high = low + 1;
    while (shown.length < TABLE_ROWS && (low >= 0 || high < nEvents)) {
      for (const step of [low, high]) {
        if (step < 0 || step >= nEvents) continue;
        const i = eventOp(step);
        if (view.matches[i] && !seen.has(i)) { seen.add(i); shown.push(i); }
      }
      low--;
      high++;
    }
    return shown.sort((a, b) => a - b);
  }
  // Rows are kept by key and rewritten only when what they show changed: a step touches the
  // few rows of the ops and semaphores it changed, not the whole table (a table's relayout is
  // what a step would otherwise spend its frame on).
  function reconcile(parent, keys, rows, row) {
    const wanted = new Set(keys);
    for (const [key, element] of rows) {
      if (!wanted.has(key)) { element.remove(); rows.delete(key); }
    }
    let cursor = parent.firstElementChild;
    for (const key of keys) {
      const [signature, attributes, html] = row(key);
      let element = rows.get(key);
      if (!element) {
        element = document.createElement(parent.tagName === "OL" ? "li" : "tr");
        rows.set(key, element);
      }
      if (element.signature !== signature) {
        element.signature = signature;
        for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
        element.innerHTML = html;
      }
      if (element !== cursor) parent.insertBefore(element, cursor);
      else cursor = cursor.nextElementSibling;
    }
  }
  const opRows = new Map();
  const semaphoreRows = new Map();
  const logRows = new Map();
  function renderOps() {
    const shown = shownOps();
    const current = view.step > 0 ? eventOp(view.step - 1) : -1;
    $("ops-note").textContent = view.matchCount > shown.length
      ? `(the ${shown.length} matching ops nearest this step of ${view.matchCount})` : `(${shown.length})`;
    reconcile($("ops").tBodies[0], shown, opRows, (i) => {
      const op = ops[i];
      const state = stateName(i);
      const known = view.opState[i] !== 0;
      const flags = `${i === view.selected ? "selected" : ""}${i === current ? " current" : ""}`;
      return [`${state}|${flags}`, {
        "data-op": i, "data-name": op.name, "data-state": state,
        "data-frontier": known ? frontierText(op.frontier) : "", class: flags,
      }, `<td>${escapeHtml(op.name)}</td><td>${escapeHtml(op.queue)}</td>` +
        `<td class="state-${state}">${state.replace("-", " ")}</td>` +
        `<td>${known ? frontierHtml(op.frontier, op.tainted) : "—"}</td>`];
    });
  }
  // Semaphores: the ones the selected op or the current event touch first, then in order.
  function renderSemaphores() {
    const wanted = [];
    const seen = new Set();
    const add = (name) => {
      const s = semaphoreOfName.get(name);
      if (s !== undefined && !seen.has(s)) { seen.add(s); wanted.push(s); }
    };
    if (view.selected >= 0) {
      for (const wait of ops[view.selected].waits) add(wait.semaphore);
      for (const signal of ops[view.selected].signals || []) add(signal.semaphore);
    }
    if (view.step > 0) for (const signal of ops[eventOp(view.step - 1)].signals || []) add(signal.semaphore);
    for (let s = 0; s < semaphores.length && wanted.length < TABLE_ROWS; s++) {
      if (!seen.has(s)) { seen.add(s); wanted.push(s); }
    }
    $("semaphores-note").textContent = semaphores.length > wanted.length
      ? `(${wanted.length} of ${semaphores.length}: the selected op's and this event's first)` : `(${semaphores.length})`;
    reconcile($("semaphores").tBodies[0], wanted, semaphoreRows, (s) => {
      const semaphore = semaphores[s];
      const value = view.semaphoreValue[s];
      const history = semaphore.history;
      let low = 0;
      let high = history.length;
      while (low < high) {
        const mid = (low + high) >> 1;
        if (history[mid].value <= value) low = mid + 1; else high = mid;
      }
      const failed = semaphore.failed && view.step === nEvents;
      const entries = history.slice(Math.max(0, low - 3), low).map((entry) =>
        `<span class="chip" data-value="${entry.value}">${entry.value} ${frontierHtml(entry.frontier, entry.tainted)}</span>`).join("");
      // The run's bounded history left out its oldest entries: all of them come before this
      // step's entries once it has reached one, and before the first kept one in any case.
      const notKept = semaphore.history_truncated || 0;
      const lost = notKept === 0 ? ""
        : `<span class="not-kept">${low > 0 ? `${notKept} earlier` : `entries before ${history[0].value}`} not kept</span> `;
      const earlier = low > 3 ? `${low - 3} earlier… ` : "";
      const more = lost || earlier ? `<span class="hint">${lost}${earlier}</span>` : "";
      return [`${value}|${failed}`, { "data-semaphore": semaphore.name, "data-value": value },
        `<td>${escapeHtml(semaphore.name)}</td><td>${value}${failed ? ' <span class="tainted">failed</span>' : ""}</td>` +
        `<td>${more}${entries}</td>`];
    });
  }
  function renderLog() {
    const first = Math.max(0, view.step - LOG_ROWS);
    const log = $("event-log");
    const steps = [];
    for (let step = first; step < view.step; step++) steps.push(step);
    reconcile(log, steps, logRows, (step) => {
      const current = step === view.step - 1 ? "current" : "";
      return [current, { "data-step": step + 1, class: current },
        `<b>${step + 1}</b> ${escapeHtml(eventText(step))}`];
    });
    logScrollPending = true;
  }

  // ---- Selection -----------------------------------------------------------------------------

  function axisEpoch(frontier, axis) {
    for (const point of frontier) if (point.axis === axis) return point.epoch;
    return -1;
  }
  function ran(op) {
    if (!hasStarted(op)) return "did not start before the deadline";
    const took = `${((op.end_ns - op.start_ns) / 1000).toFixed(1)} µs`;
    if (op.status === "running") return `${micros(op.start_ns)} → still running at the deadline, ${micros(op.end_ns)} (${took})`;
    return `${micros(op.start_ns)} → ${micros(op.end_ns)} (${took})`;
  }
  // In a run stopped at its deadline, the op's waits not reached then.
  function deadlineRow(op) {
    if (!timedOut || hasStarted(op)) return "";
    const pending = pendingOf.get(op.name) || [];
    const waits = pending.map((wait) =>
      `<li data-semaphore="${escapeHtml(wait.semaphore)}" data-value="${wait.value}">${escapeHtml(wait.semaphore)} ≥ ${wait.value} (at ${wait.at})</li>`).join("");
    return `<dt>pending at the deadline</dt><dd><ul id="sel-pending" data-count="${pending.length}">${waits || "<li>no wait: behind earlier work, or never submitted</li>"}</ul></dd>`;
  }
  function select(i) {
    view.selected = i;
    const panel = $("selected");
    panel.dataset.op = i >= 0 ? ops[i].name : "";
    if (i < 0) {
      panel.innerHTML = '<p class="hint">Click an op in the lanes, the graph or the table.</p>';
      redraw();
      return;
    }
    const op = ops[i];
    // Who learned of it: every op whose frontier covers its point on its own axis.
    const direct = new Set();
    for (let e = outStart[i]; e < outStart[i + 1]; e++) direct.add(waitOwner[outWait[e]]);
    const learners = [];
    for (let j = 0; j < nOps; j++) {
      if (j !== i && axisEpoch(ops[j].frontier, op.queue) >= op.epoch) learners.push(j);
    }
    const transitive = learners.filter((j) => !direct.has(j) && lane[j] !== lane[i]);
    const name = (j) => `<a href="#" data-select="${j}">${escapeHtml(ops[j].name)}</a>`;
    const waits = op.waits.map((wait, w) => {
      const from = waitFrom[waitStart[i] + w];
      return `<li data-semaphore="${escapeHtml(wait.semaphore)}" data-value="${wait.value}"` +
        ` data-resolution="${escapeHtml(wait.resolution)}" data-tainted="${wait.tainted}"` +
        ` data-signaller="${from >= 0 ? escapeHtml(ops[from].name) : ""}">` +
        `${escapeHtml(wait.semaphore)} ≥ ${wait.value}: <span class="res res-${escapeHtml(wait.resolution)}">${escapeHtml(wait.resolution)}</span>` +
        `${wait.tainted ? ' <span class="tainted">tainted</span>' : ""}` +
        `${from >= 0 ? ` — signalled by ${name(from)}` : " — no op in the run signals it"}</li>`;
    }).join("");
    const signals = (op.signals || []).map((s) =>
      `<li data-semaphore="${escapeHtml(s.semaphore)}" data-value="${s.value}">${escapeHtml(s.semaphore)} = ${s.value}</li>`).join("");
    const list = (ids) => ids.slice(0, 60).map(name).join(", ") + (ids.length > 60 ? `, … ${ids.length - 60} more` : "");
    panel.innerHTML = `<dl>
      <dt>op</dt><dd id="sel-name">${escapeHtml(op.name)}</dd>
      <dt>queue</dt><dd>${escapeHtml(op.queue)} (${escapeHtml(laneDriver[lane[i]])}), epoch ${op.epoch}</dd>
      <dt>status</dt><dd id="sel-status" data-status="${escapeHtml(op.status)}">${escapeHtml(op.status)}</dd>
      <dt>ran</dt><dd>${ran(op)}</dd>${deadlineRow(op)}
      <dt>frontier</dt><dd><ul id="sel-frontier" data-frontier="${escapeHtml(frontierText(op.frontier))}" data-tainted="${op.tainted}">${op.frontier.map((p) =>
        `<li data-axis="${escapeHtml(p.axis)}" data-epoch="${p.epoch}">${escapeHtml(p.axis)}: ${p.epoch}</li>`).join("")}</ul>${op.tainted ? '<span class="tainted">tainted</span>' : ""}</dd>
      <dt>waits</dt><dd><ul id="sel-waits">${waits || "<li>none</li>"}</ul></dd>
      <dt>signals</dt><dd><ul id="sel-signals">${signals || "<li>none</li>"}</ul></dd>
      <dt>waited on by</dt><dd id="sel-direct" data-count="${direct.size}">${direct.size ? list([...direct].sort((a, b) => a - b)) : "none"}</dd>
      <dt>learned of it</dt><dd id="sel-learners" data-count="${learners.length}" data-transitive="${transitive.length}">${learners.length} ops (${transitive.length} on other queues without waiting on it: transitively)${learners.length ? ": " + list(learners) : ""}</dd>
    </dl>`;
    renderOps();
    renderSemaphores();
    redraw();
  }

  // ---- Comparison ----------------------------------------------------------------------------

  function renderComparison() {
    let crossEdges = 0;
    let sameQueueEdges = 0;
    let unlinked = 0;
    const eventSources = new Set();
    const counts = [0, 0, 0, 0, 0];
    let taintedWaits = 0;
    for (let w = 0; w < nWaits; w++) {
      counts[waitResolution[w]]++;
      taintedWaits += waitTainted[w];
      const from = waitFrom[w];
      if (from < 0) { unlinked++; continue; }
      if (lane[from] === lane[waitOwner[w]]) sameQueueEdges++;
      else { crossEdges++; eventSources.add(from); }
    }
    // Transitive facts: an op's knowledge of another queue it reached only through an
    // intermediary (no direct wait on that queue's signal). Frontiers carry these; binary events
    // and plain timelines make the application forward each one.
    let transitiveFacts = 0;
    let entries = 0;
    let maxEntries = 0;
    for (let i = 0; i < nOps; i++) {
      const direct = new Set([ops[i].queue]);
      for (let w = waitStart[i]; w < waitStart[i + 1]; w++) if (waitFrom[w] >= 0) direct.add(ops[waitFrom[w]].queue);
      for (const point of ops[i].frontier) if (!direct.has(point.axis)) transitiveFacts++;
      entries += ops[i].frontier.length;
      maxEntries = Math.max(maxEntries, ops[i].frontier.length);
    }
    let signalCount = 0;
    let signalEntries = 0;
    for (let i = 0; i < nOps; i++) {
      const n = (ops[i].signals || []).length;
      signalCount += n;
      signalEntries += n * ops[i].frontier.length;
    }
    const memory = (report.stats && report.stats.memory) || {};
    const reuses = memory.reused || 0;
    const issuedByFrontiers = counts[2] + counts[3];
    const rows = [
      ["events", "synchronisation objects", eventSources.size, semaphores.length, semaphores.length,
        "binary: one event per signalling op another queue waits on; timelines and frontiers: the run's semaphores"],
      ["waits", "waits issued (device or held)", crossEdges, crossEdges, issuedByFrontiers,
        "binary events and timelines issue every cross-queue wait; frontiers issued only the device and held ones"],
      ["elided", "waits skipped as already known", sameQueueEdges, sameQueueEdges, counts[0],
        "binary and timelines: only waits on the same queue's own earlier work (program order)"],
      ["forwarded", "transitive facts the application forwards", transitiveFacts, transitiveFacts, 0,
        "knowledge of a queue reached only through an intermediary; frontiers carried it"],
      ["reuse", "buffer reuse checks", reuses ? `${reuses} × uses` : 0, reuses ? `${reuses} × uses` : 0, reuses,
        "binary and timelines: a query per earlier use of the buffer; frontiers: one dominance check per reuse"],
      ["bytes", "context carried per signal (bytes, total)", 0, 8 * signalCount, 16 * signalEntries,
        "timelines: a 64-bit value per signal; frontiers: 16 bytes per frontier entry per signal"],
    ];
    $("compare").innerHTML = `<table><thead><tr><th></th><th>binary events</th><th>plain timelines</th><th>frontiers (this run)</th></tr></thead><tbody>${
      rows.map(([id, label, binary, timeline, frontier, why]) =>
        `<tr data-metric="${id}" title="${escapeHtml(why)}"><td>${label}</td><td data-model="binary">${binary}</td>` +
        `<td data-model="timeline">${timeline}</td><td data-model="frontier">${frontier}</td></tr>`).join("")
    }</tbody></table>
    <p id="compare-resolutions" data-elided="${counts[0]}" data-satisfied="${counts[1]}" data-device="${counts[2]}" data-held="${counts[3]}" data-failed="${counts[4]}" data-tainted="${taintedWaits}">
    ${nWaits} waits: ${counts[0]} elided, ${counts[1]} satisfied, ${counts[2]} device, ${counts[3]} held, ${counts[4]} on failed semaphores, ${taintedWaits} tainted;
    ${unlinked} with no signalling op in the run. Frontiers: ${(entries / Math.max(1, nOps)).toFixed(2)} entries on average, ${maxEntries} at most.
    Hover a row for how it is counted.</p>`;
  }

  // ---- Rendering and input -------------------------------------------------------------------

  // Drawing, and the log's scroll (which forces a layout), wait for the next frame: a burst of
  // steps between two frames costs one of each.
  let drawQueued = false;
  let logScrollPending = false;
  function redraw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => {
      drawQueued = false;
      drawLanes();
      drawDag();
      if (logScrollPending) {
        logScrollPending = false;
        const log = $("event-log");
        log.scrollTop = log.scrollHeight;
      }
    });
  }
  function renderStep() {
    const step = $("step");
    step.dataset.step = view.step;
    step.textContent = `event ${view.step} / ${nEvents}`;
    $("step-slider").value = view.step;
    $("event-now").textContent = view.step > 0 ? eventText(view.step - 1) : "before the first event";
    renderOps();
    renderSemaphores();
    renderLog();
    redraw();
  }
  function applyFilter(text) {
    view.filter = text.trim().toLowerCase();
    let count = 0;
    for (let i = 0; i < nOps; i++) {
      const match = !view.filter || ops[i].name.toLowerCase().includes(view.filter)
        || ops[i].queue.toLowerCase().includes(view.filter);
      view.matches[i] = match ? 1 : 0;
      count += match;
    }
    view.matchCount = count;
    filterVersion++;
    $("filter-count").textContent = view.filter ? `${count} of ${nOps} ops` : "";
    renderOps();
    redraw();
  }
  function setAxis(axis) {
    view.axis = axis;
    const button = $("axis");
    button.dataset.axis = axis;
    button.textContent = `time: ${axis}`;
    button.setAttribute("aria-pressed", String(axis === "compressed"));
    redraw();
  }
  function setTheme(theme) {
    document.documentElement.dataset.theme = theme;
    readColours();
    redraw();
  }

  let playing = 0;
  function play() {
    if (playing) { clearInterval(playing); playing = 0; $("step-play").textContent = "▶"; return; }
    if (view.step >= nEvents) goTo(0);
    $("step-play").textContent = "❚❚";
    playing = setInterval(() => {
      if (view.step >= nEvents) { play(); return; }
      goTo(view.step + 1);
    }, Math.max(16, Math.min(150, 6000 / Math.max(1, nEvents))));
  }

  $("step-first").addEventListener("click", () => goTo(0));
  $("step-prev").addEventListener("click", () => goTo(view.step - 1));
  $("step-next").addEventListener("click", () => goTo(view.step + 1));
  $("step-last").addEventListener("click", () => goTo(nEvents));
  $("step-play").addEventListener("click", play);
  $("step-slider").max = nEvents;
  $("step-slider").addEventListener("input", (event) => goTo(Number(event.target.value)));
  $("step").dataset.total = nEvents;
  $("filter").addEventListener("input", (event) => applyFilter(event.target.value));
  $("theme").addEventListener("click", () =>
    setTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"));
  $("zoom-in").addEventListener("click", () => { view.zoom *= 2; redraw(); });
  $("zoom-out").addEventListener("click", () => { view.zoom = Math.max(1, view.zoom / 2); redraw(); });
  lanesScroll.addEventListener("wheel", (event) => {
    if (!event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    view.zoom = Math.max(1, view.zoom * (event.deltaY < 0 ? 1.25 : 0.8));
    redraw();
  }, { passive: false });
  lanesScroll.addEventListener("scroll", redraw);
  dagScroll.addEventListener("scroll", redraw);
  window.addEventListener("resize", redraw);
  lanesCanvas.addEventListener("click", (event) => { const i = laneHit(event); if (i >= 0) select(i); });
  dagCanvas.addEventListener("click", (event) => { const i = dagHit(event); if (i >= 0) select(i); });
  // The op under the pointer, whole, as the canvas's title: names are cut to fit their bars
  // and boxes.
  lanesCanvas.addEventListener("mousemove", (event) => {
    const i = laneHit(event);
    lanesCanvas.title = i >= 0 ? `${ops[i].name} (${ops[i].status})` : "";
  });
  dagCanvas.addEventListener("mousemove", (event) => {
    const i = dagHit(event);
    dagCanvas.title = i >= 0 ? ops[i].name : "";
  });
  $("axis").addEventListener("click", () => setAxis(view.axis === "linear" ? "compressed" : "linear"));
  document.addEventListener("click", (event) => {
    const link = event.target.closest("[data-select]");
    if (link) { event.preventDefault(); select(Number(link.dataset.select)); return; }
    const row = event.target.closest("tr[data-op]");
    if (row) select(Number(row.dataset.op));
  });
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement && event.target.type !== "range") {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    const keys = {
      ArrowRight: () => goTo(view.step + 1),
      ArrowLeft: () => goTo(view.step - 1),
      PageDown: () => goTo(view.step + 50),
      PageUp: () => goTo(view.step - 50),
      Home: () => goTo(0),
      End: () => goTo(nEvents),
      " ": play,
      t: () => $("theme").click(),
      "/": () => $("filter").focus(),
      c: () => $("axis").click(),
      Escape: () => select(-1),
    };
    if (keys[event.key]) { event.preventDefault(); keys[event.key](); }
  });

  // ---- First paint ---------------------------------------------------------------------------

  $("scenario-name").textContent = report.scenario;
  document.title = `causeway: ${report.scenario}`;
  const stats = report.stats || {};
  $("run-summary").textContent = `${nOps} ops on ${laneNames.length} queues ` +
    `(${[...new Set(laneDriver)].join(", ")}), ${semaphores.length} semaphores, ${nWaits} waits` +
    (stats.wall_ns ? `, ${(stats.wall_ns / 1e6).toFixed(2)} ms wall` : "") +
    (timedOut ? ", stopped at its deadline" : "");
  if (timedOut) {
    const count = (status) => ops.reduce((n, op) => n + (op.status === status), 0);
    const [stillRunning, notStarted] = [count("running"), count("not_started")];
    const pending = timedOut.pending_waits;
    const listed = pending.slice(0, 10).map((wait) => {
      const i = opByName.get(wait.op);
      const who = i === undefined ? escapeHtml(wait.op) : `<a href="#" data-select="${i}">${escapeHtml(wait.op)}</a>`;
      return `<li>${who}: ${escapeHtml(wait.semaphore)} ≥ ${wait.value} (at ${wait.at})</li>`;
    }).join("");
    const banner = $("timed-out");
    banner.hidden = false;
    banner.dataset.running = stillRunning;
    banner.dataset.notStarted = notStarted;
    banner.dataset.pending = pending.length;
    banner.innerHTML = `<b>Timed out</b> after ${(timedOut.timeout_ns / 1e9).toFixed(3)} s: ` +
      `${escapeHtml(timedOut.reason)}. What follows is the run as the deadline found it: ` +
      `${stillRunning} ops still running, ${notStarted} not started, ${pending.length} waits not reached` +
      (pending.length ? `:<ul>${listed}${pending.length > 10 ? `<li>… ${pending.length - 10} more</li>` : ""}</ul>` : ".");
  }
  const trace = $("trace-link");
  if (!trace.dataset.trace) {
    trace.classList.add("absent");
    trace.removeAttribute("href");
    trace.textContent = "no Perfetto trace (run with --trace)";
  }
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  readColours();
  renderComparison();
  renderStep();
  requestAnimationFrame(() => {
    view.timings.firstPaintMs = performance.now();
    view.timings.buildMs = performance.now() - started;
    document.body.dataset.ready = "true";
  });
})();
