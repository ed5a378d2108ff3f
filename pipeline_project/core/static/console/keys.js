/* The console frame's keys and dialogs, on every admin and /pipeline page (loaded after console.js
   by templates/includes/console_frame.html): the confirmation dialog (data-confirm on a form, a
   button or a link), declarative shortcuts (data-shortcut, data-shortcut-label: a link or button
   is clicked, a field focused), the keys of lists (data-keyboard-list: j/k, o/Enter, x), the keys
   to the main pages (g then d, j, q, w, p, r), / for the search and ? for the list of them all.
   Keys are ignored while typing in a field and with Ctrl, Alt or Meta. Without JavaScript a form
   submits unasked: the server's own checks remain the guard. */
(function () {
  "use strict";

  /* ---- Dialogs: the confirmation and the shortcuts' overlay ---- */
  function dialog(id, label) {
    let box = document.getElementById(id);
    if (!box) {
      box = document.createElement("dialog");
      box.id = id;
      box.className = "console-dialog";
      box.setAttribute("aria-labelledby", id + "-title");
      document.body.append(box);
    }
    box.replaceChildren();
    const title = document.createElement("h2");
    title.id = id + "-title";
    title.textContent = label;
    box.append(title);
    return box;
  }

  function openModal(box, focus) {
    const before = document.activeElement;
    box.addEventListener("close", function () { if (before && before.focus) before.focus(); }, {once: true});
    box.showModal();
    if (focus) focus.focus();
  }

  function button(text, className) {
    const made = document.createElement("button");
    made.type = "button";
    made.className = className;
    made.textContent = text;
    return made;
  }

  const confirmed = new WeakSet();

  function askThenDo(question, confirmLabel, proceed) {
    const box = dialog("console-confirm", "Please confirm");
    const text = document.createElement("p");
    text.textContent = question;
    const cancel = button("Cancel", "button cancel");
    const confirm = button(confirmLabel || "Confirm", "button default");
    const buttons = document.createElement("div");
    buttons.className = "console-dialog-buttons";
    buttons.append(cancel, confirm);
    box.append(text, buttons);
    cancel.addEventListener("click", function () { box.close(); });
    confirm.addEventListener("click", function () { box.close(); proceed(); });
    openModal(box, cancel);  // a stray Enter must not retry or delete: Cancel has the focus
  }

  // A live refresh may have replaced what asked while the operator read the question (one under
  // way as the dialog opened): what was confirmed is put back, out of sight, to be sent as it was.
  function keepInPage(element) {
    if (element.isConnected) return;
    element.hidden = true;
    document.body.append(element);
  }

  document.addEventListener("click", function (event) {
    const trigger = event.target.closest("a[data-confirm], button[data-confirm], input[data-confirm]");
    if (!trigger || confirmed.has(trigger)) return;
    event.preventDefault();
    askThenDo(trigger.dataset.confirm, trigger.dataset.confirmButton, function () {
      confirmed.add(trigger);
      if (trigger.form && trigger.form.matches("[data-confirm]")) confirmed.add(trigger.form);  // answered too
      keepInPage(trigger.form || trigger);
      trigger.click();
      confirmed.delete(trigger);
    });
  }, true);

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!form.matches("form[data-confirm]")) return;
    if (confirmed.has(form)) { confirmed.delete(form); return; }
    event.preventDefault();
    const submitter = event.submitter;
    askThenDo(form.dataset.confirm, form.dataset.confirmButton, function () {
      confirmed.add(form);
      keepInPage(form);
      form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
    });
  }, true);

  /* ---- Keyboard shortcuts ---- */
  let everywhere = [];  // [keys, label, path], from console_frame.html
  let pending = "";  // the "g" of "g j", for a moment
  let pendingTimer = null;

  function typing(target) {
    return target.closest("input, select, textarea, [contenteditable=''], [contenteditable=true]");
  }

  function declared() {
    const seen = new Map();
    for (const element of document.querySelectorAll("[data-shortcut]")) {
      if (!seen.has(element.dataset.shortcut) && !element.closest("dialog:not([open])")) {
        seen.set(element.dataset.shortcut, element);
      }
    }
    return seen;
  }

  function lists() {
    return Array.from(document.querySelectorAll("[data-keyboard-list]")).filter(function (list) {
      return list.getClientRects().length;
    });
  }

  function rowsOf(list) {
    const rows = list.tBodies ? Array.from(list.tBodies).flatMap(function (body) { return Array.from(body.rows); })
      : Array.from(list.querySelectorAll(":scope > li, :scope > [data-keyboard-row]"));
    return rows.filter(function (row) { return row.getClientRects().length; });
  }

  let currentRowLink = null;  // the highlighted row, by its first link: found again after a live refresh

  function currentRow() {
    return document.querySelector("[data-keyboard-list] .keyboard-current");
  }

  function highlight(row) {
    const old = currentRow();
    if (old) old.classList.remove("keyboard-current");
    row.classList.add("keyboard-current");
    const link = row.querySelector("a[href]");
    currentRowLink = link ? link.getAttribute("href") : null;
    row.scrollIntoView({block: "nearest"});
  }

  function restoreHighlight() {
    if (!currentRowLink || currentRow()) return;
    for (const list of lists()) {
      const row = rowsOf(list).find(function (r) {
        const link = r.querySelector("a[href]");
        return link && link.getAttribute("href") === currentRowLink;
      });
      if (row) { row.classList.add("keyboard-current"); return; }
    }
  }

  function listKey(key) {
    const found = lists();
    if (!found.length) return false;
    const current = currentRow();
    const list = current ? current.closest("[data-keyboard-list]") : found[0];
    const rows = rowsOf(list);
    if (!rows.length) return false;
    const at = rows.indexOf(current);
    if (key === "j" || key === "k") {
      const next = at < 0 ? 0 : Math.min(Math.max(at + (key === "j" ? 1 : -1), 0), rows.length - 1);
      highlight(rows[next]);
      return true;
    }
    if (!current) return false;
    if (key === "o" || key === "Enter") {
      const link = current.querySelector("a[href]");
      if (link) link.click();
      return Boolean(link);
    }
    if (key === "x") {
      const box = current.querySelector("input[type=checkbox]");
      if (box) box.click();  // a click, so the admin's actions bar counts it
      return Boolean(box);
    }
    return false;
  }

  function activate(element) {
    if (element.matches("input, select, textarea")) {
      element.focus();
      if (element.select) element.select();
    } else {
      element.click();
    }
  }

  function keyName(event) {
    return event.key.length === 1 ? event.key : event.key === "Enter" ? "Enter" : null;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.altKey || event.metaKey || event.defaultPrevented) return;
    if (typing(event.target) || document.querySelector("dialog[open]:not(#console-shortcuts)")) return;
    const key = keyName(event);
    if (!key) return;
    if (key === "Enter" && event.target.closest("a, button, summary, [tabindex]:not(main)")) return;
    const overlay = document.getElementById("console-shortcuts");
    if (overlay && overlay.open) {
      if (key === "?") { event.preventDefault(); overlay.close(); }
      return;
    }
    const keys = pending ? pending + " " + key : key;
    clearTimeout(pendingTimer);
    pending = "";
    const element = declared().get(keys);
    const global = everywhere.find(function (entry) { return entry[0] === keys; });
    let handled = true;
    if (element) activate(element);
    else if (global) window.location.href = global[2];
    else if (keys === "?") showShortcuts();
    else if (keys === "/") {
      const search = document.querySelector("#searchbar, #content input[type=search], #content input[name=q]");
      if (search) activate(search); else handled = false;
    } else if (keys === "g") {
      pending = "g";
      pendingTimer = setTimeout(function () { pending = ""; }, 1500);
    } else handled = listKey(key);
    if (handled) event.preventDefault();
  });

  function shortcutTable(title, entries) {
    const section = document.createElement("section");
    const heading = document.createElement("h3");
    heading.textContent = title;
    const table = document.createElement("table");
    for (const [keys, label] of entries) {
      const row = table.insertRow();
      const keysCell = document.createElement("th");
      keysCell.scope = "row";
      keys.split(" ").forEach(function (part, index) {
        if (index) keysCell.append(" then ");
        const kbd = document.createElement("kbd");
        kbd.textContent = part;
        keysCell.append(kbd);
      });
      row.append(keysCell);
      row.insertCell().textContent = label;
    }
    section.append(heading, table);
    return section;
  }

  function showShortcuts() {
    const box = dialog("console-shortcuts", "Keyboard shortcuts");
    const onPage = Array.from(declared(), function ([keys, element]) {
      return [keys, element.dataset.shortcutLabel || element.textContent.trim() || element.getAttribute("aria-label")];
    });
    if (onPage.length) box.append(shortcutTable("On this page", onPage));
    if (lists().length) {
      box.append(shortcutTable("In the list", [
        ["j", "Next row"], ["k", "Previous row"], ["o", "Open the row"], ["Enter", "Open the row"],
        ["x", "Select or unselect the row"],
      ]));
    }
    const onPageKeys = new Set(onPage.map(function (entry) { return entry[0]; }));
    const global = [...everywhere, ["/", "Search"], ["?", "Show or hide this list"]];
    box.append(shortcutTable("Everywhere", global.filter(function (entry) { return !onPageKeys.has(entry[0]); })));
    const close = button("Close", "button");
    close.addEventListener("click", function () { box.close(); });
    const buttons = document.createElement("div");
    buttons.className = "console-dialog-buttons";
    buttons.append(close);
    const note = document.createElement("p");
    note.className = "help";
    note.textContent = "Keys are ignored while you type in a field. Esc closes this list.";
    box.append(note, buttons);
    openModal(box, close);
  }

  document.addEventListener("console:refreshed", restoreHighlight);  // from includes/live_refresh.html

  function start() {
    const data = document.getElementById("console-shortcuts-data");
    if (data) everywhere = JSON.parse(data.textContent);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
