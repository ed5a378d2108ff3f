/* The console frame, on every admin and /pipeline page (templates/includes/console_frame.html):
   live times (time.moment, time.countdown), copy buttons (.copy-button), the Live/Paused control
   of live refresh (templates/includes/live_refresh.html), and tables that scroll inside their own
   box with their key column pinned; keys.js has the shortcuts and the dialogs.
   Loaded in the page's head, not deferred: live_refresh.html's inline script registers with
   window.consoleLive while the page is still being read. Without JavaScript every page still
   works: times read as rendered, tables as Django draws them, no polling. */
(function () {
  "use strict";

  /* ---- Times: the wording of pipeline_project/web/times.py ---- */
  const UNITS = [["d", 86400], ["h", 3600], ["min", 60]];

  function largestUnit(seconds) {
    for (const [unit, size] of UNITS) if (seconds >= size) return Math.floor(seconds / size) + " " + unit;
    return seconds + " s";
  }

  function toTheSecond(seconds) {
    const minutes = Math.floor(seconds / 60), rest = seconds % 60;
    if (!minutes) return rest + " s";
    const hours = Math.floor(minutes / 60);
    if (!hours) return minutes + " min " + rest + " s";
    if (hours < 48) return hours + " h " + (minutes % 60) + " min";
    return Math.floor(hours / 24) + " d " + (hours % 24) + " h";
  }

  function secondsUntil(element) {
    return Math.trunc((Date.parse(element.getAttribute("datetime")) - Date.now()) / 1000);
  }

  function refreshTimes(selector, text) {
    for (const element of document.querySelectorAll(selector)) {
      const seconds = secondsUntil(element);
      if (!Number.isNaN(seconds)) element.textContent = text(seconds);
    }
  }

  const momentText = s => (s <= 0 ? largestUnit(-s) + " ago" : "in " + largestUnit(s));
  const countdownText = s => (s >= 0 ? "in " + toTheSecond(s) : toTheSecond(-s) + " ago");

  /* ---- Copy ---- */
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {  // plain http: the old way, through a selection
      const area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      const copied = document.execCommand("copy");
      area.remove();
      (copied ? resolve : reject)();
    });
  }

  function announce(message) {
    let region = document.getElementById("console-announcer");
    if (!region) {
      region = document.createElement("div");
      region.id = "console-announcer";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.append(region);
    }
    region.textContent = message;
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest(".copy-button");
    if (!button) return;
    event.preventDefault();
    copyText(button.dataset.copy).then(function () {
      button.classList.add("copied");
      announce("Copied " + button.dataset.copy);
      setTimeout(function () { button.classList.remove("copied"); }, 1500);
    }, function () { announce("Could not copy: select the text and copy it by hand"); });
  });

  /* ---- Live refresh: one Live/Paused control a page, remembered across pages ---- */
  const LIVE_KEY = "console.live";
  const refreshers = [];
  let liveButton = null;

  function drawLiveButton() {
    const live = !consoleLive.paused();
    liveButton.setAttribute("aria-pressed", String(live));
    liveButton.classList.toggle("paused", !live);
    liveButton.lastChild.textContent = live ? "Live" : "Paused";
    liveButton.title = live ? "Updates every few seconds: click to pause" : "Paused: click to update live again";
  }

  function placeLiveButton() {
    if (liveButton || !refreshers.length) return;
    liveButton = document.createElement("button");
    liveButton.type = "button";
    liveButton.id = "live-toggle";
    liveButton.className = "live-toggle";
    liveButton.dataset.shortcut = "l";
    liveButton.dataset.shortcutLabel = "Pause or resume live updates";
    const dot = document.createElement("span");
    dot.className = "live-dot";
    dot.setAttribute("aria-hidden", "true");
    liveButton.append(dot, document.createElement("span"));
    liveButton.addEventListener("click", function () {
      const paused = !consoleLive.paused();
      try { localStorage.setItem(LIVE_KEY, paused ? "paused" : "live"); } catch (error) { /* private mode */ }
      drawLiveButton();
      if (!paused) refreshers.forEach(function (refresh) { refresh(); });  // resumed: fresh at once
    });
    const place = document.querySelector("#content .titles-and-tools") || document.getElementById("content");
    if (place) place.append(liveButton); else document.body.prepend(liveButton);
    drawLiveButton();
  }

  const consoleLive = {
    paused: function () {
      try { return localStorage.getItem(LIVE_KEY) === "paused"; } catch (error) { return false; }
    },
    register: function (refresh) {  // live_refresh.html's tick, called again at once on resuming
      refreshers.push(refresh);
      if (document.readyState !== "loading") placeLiveButton();
    },
  };
  window.consoleLive = consoleLive;

  /* ---- Tables: scrolled inside their own box, the key column pinned ---- */
  function keyColumn(table) {
    const row = table.tBodies[0] && table.tBodies[0].rows[0];
    if (!row) return -1;
    const cells = Array.from(row.cells);
    let key = cells.findIndex(function (cell) { return cell.tagName === "TH"; });
    if (key < 0) key = cells.findIndex(function (cell) { return cell.querySelector("a[href]"); });
    return key < 0 || key > 2 ? 0 : key;  // a link far right is no key: pin the first column then
  }

  function pin(table) {
    const key = keyColumn(table);
    if (key < 0 || table.rows[0].cells.length < 3) return;
    const first = table.tBodies[0].rows[0].cells;
    const lefts = Array.from(first).slice(0, key + 1).map(function (cell) { return cell.offsetLeft; });
    for (const row of table.rows) {
      let column = 0;
      for (const cell of row.cells) {
        if (column > key) break;
        if (column + cell.colSpan - 1 <= key) {
          cell.classList.add("pinned");
          cell.style.left = (lefts[column] - lefts[0]) + "px";
          cell.classList.toggle("pinned-last", column + cell.colSpan - 1 === key);
        }
        column += cell.colSpan;
      }
    }
  }

  // A cell with a long unbroken value (an id, a hash, an image's name) may break it anywhere, so
  // that its column need not push the others out of sight; words elsewhere still break as words.
  const LONG_VALUE = /\S{24,}/;

  function markLongValues(table) {
    if (getComputedStyle(table).tableLayout === "fixed") return;  // a page that sized its columns itself
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        for (const cell of row.cells) cell.classList.toggle("long-value", LONG_VALUE.test(cell.textContent));
      }
    }
  }

  function frameTables(root) {
    for (const table of root.querySelectorAll("#content table")) {
      if (table.closest(".table-scroll, .results, .chart")) {
        if (table.closest(".results")) table.closest(".results").classList.add("table-scroll");
      } else {
        const box = document.createElement("div");
        box.className = "table-scroll";
        table.before(box);
        box.append(table);
      }
      markLongValues(table);
      pin(table);
    }
    const changelist = document.getElementById("result_list");
    if (changelist && !changelist.closest("[data-keyboard-list]")) changelist.dataset.keyboardList = "";
  }

  /* ---- Start ---- */
  // The apps' sidebar starts folded, so lists get the page's width; its toggle opens it (and
  // Django remembers that choice), and the home page lists every app.
  try {
    if (localStorage.getItem("django.admin.navSidebarIsOpen") === null) {
      localStorage.setItem("django.admin.navSidebarIsOpen", "false");
    }
  } catch (error) { /* no storage: Django's default */ }

  function start() {
    frameTables(document);
    placeLiveButton();
    refreshTimes("time.moment", momentText);
    refreshTimes("time.countdown", countdownText);
    setInterval(function () { refreshTimes("time.moment", momentText); }, 5000);
    setInterval(function () { refreshTimes("time.countdown", countdownText); }, 1000);
    let resized = null;
    window.addEventListener("resize", function () {
      clearTimeout(resized);
      resized = setTimeout(function () { document.querySelectorAll("#content table").forEach(pin); }, 200);
    });
  }

  // live_refresh.html says so after it replaced a part of the page
  document.addEventListener("console:refreshed", function (event) {
    frameTables(event.target);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
