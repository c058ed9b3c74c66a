// chat.js — keeps a chat room page current without reloading (no framework, no build step).
//
// It long-polls GET /chat/{room}/messages?since=LAST&wait=25: the server answers at once
// when there is news, or parks the request until a message arrives (from any process) or the
// wait ends. The poll carries the page's CSRF token in X-CSRF-Token: that is what marks the
// name as present (a bare GET does not), and a 429 (too many polls waiting) is retried after
// its Retry-After. The say form is sent as JSON with the page's CSRF token in X-CSRF-Token; the
// new message then arrives through the poll like everyone else's, so every client shows
// the same order. Without JavaScript the page still works: a plain form post and a
// <noscript> refresh. Text is only ever inserted with textContent (never as HTML).
"use strict";

(function () {
  const main = document.getElementById("chat");
  if (!main) return;
  const room = main.dataset.room;
  const list = document.getElementById("messages");
  const form = document.getElementById("say");
  const status = document.getElementById("status");
  const nameInput = document.getElementById("name");
  const textInput = document.getElementById("text");
  const whoBox = document.getElementById("who");
  const base = "/chat/" + encodeURIComponent(room) + "/";
  let last = Number(main.dataset.last) || 0;
  const token = form.querySelector('input[name="_csrf"]').value;

  // Seconds to wait from a 429's Retry-After, within 1..60; `fallback` when absent.
  function retryAfter(response, fallback) {
    const s = Number(response.headers.get("Retry-After"));
    return Number.isFinite(s) && s > 0 ? Math.min(s, 60) : fallback;
  }

  try {
    const saved = window.localStorage.getItem("kagi-chat-name");
    if (saved && !nameInput.value) nameInput.value = saved;
  } catch (e) {
    // Storage may be disabled; the name is then simply not remembered.
  }

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  function show(message) {
    if (list.querySelector('li[data-id="' + message.id + '"]')) return;  // already shown
    const empty = document.getElementById("empty");
    if (empty) empty.remove();
    const li = document.createElement("li");
    li.className = "chat-message";
    li.dataset.id = String(message.id);
    const time = document.createElement("span");
    time.className = "meta";
    const d = new Date(message.time * 1000);
    time.textContent = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    const name = document.createElement("b");
    name.className = "chat-name";
    name.textContent = message.name;
    const text = document.createElement("span");
    text.className = "chat-text";
    text.textContent = message.text;
    li.append(time, " ", name, ": ", text);
    list.append(li);
    li.scrollIntoView({ block: "nearest" });
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  async function poll() {
    let backoff = 1000;
    for (;;) {
      const url = base + "messages?since=" + last + "&wait=25&name=" +
                  encodeURIComponent(nameInput.value.trim());
      try {
        const response = await fetch(url, {
          cache: "no-store",
          credentials: "same-origin",
          headers: { "X-CSRF-Token": token },
        });
        if (response.status === 429) {
          status.textContent = "Busy; waiting for a place…";
          await sleep(retryAfter(response, 5) * 1000);
          continue;
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        const data = await response.json();
        for (const m of data.messages) {
          if (m.id > last) show(m);
        }
        last = data.last;  // also follows a room that restarted below our id
        backoff = 1000;
        status.textContent = "";
      } catch (e) {
        status.textContent = "Connection lost; retrying…";
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 10000);
      }
    }
  }

  async function refreshWho() {
    try {
      const response = await fetch(base + "who", { cache: "no-store" });
      if (!response.ok) return;
      const data = await response.json();
      whoBox.replaceChildren();
      for (const name of data.who) {
        const span = document.createElement("span");
        span.className = "who-name";
        span.textContent = name;
        whoBox.append(span, " ");
      }
    } catch (e) {
      // Presence is a nicety: try again at the next tick.
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = textInput.value.trim();
    if (!text) return;
    const name = nameInput.value.trim();
    try {
      window.localStorage.setItem("kagi-chat-name", name);
    } catch (e) {
      // not remembered; fine
    }
    try {
      const response = await fetch(base + "say", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
        body: JSON.stringify({ name: name, text: text }),
      });
      if (!response.ok) {
        if (response.status === 403) {
          status.textContent = "Your session token is out of date; reload the page.";
        } else if (response.status === 429) {
          status.textContent = "You are sending too fast; wait " + retryAfter(response, 10) +
                               " s and send it again.";
        } else {
          status.textContent = "Not sent (HTTP " + response.status + "); try again.";
        }
        return;
      }
      textInput.value = "";
      status.textContent = "";
    } catch (e) {
      status.textContent = "Not sent: the connection failed; try again.";
    }
  });

  poll();
  refreshWho();
  setInterval(refreshWho, 20000);
})();
