// bbs-edit.js — keeps an open post editor's offline lock while the page is open.
//
// The editor's lock runs out bbs.edit_ttl_s after it was taken or last renewed. This page
// renews it a third of that time after each renewal (POST .../renew with the page's CSRF
// token in X-CSRF-Token) and shows the time left. Closing the tab stops the renewals, so an
// abandoned editor frees the post within one TTL. If a renewal finds the lock gone (it ran out
// while the computer slept, an admin released it, someone took it over) the page says so at
// once: whatever is typed can be copied before it is lost. Without JavaScript the page still
// works; the lock then lasts one TTL from opening.
"use strict";

(function () {
  const form = document.getElementById("editor");
  if (!form) return;
  const token = form.querySelector('input[name="_csrf"]').value;
  const leftText = document.getElementById("left");
  const status = document.getElementById("lock-status");
  let ttl = Math.max(1, Number(form.dataset.left) || 60);

  function describe(s) {
    return s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
  }

  let deadline = Date.now() + ttl * 1000;
  function tick() {
    const s = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    leftText.textContent = describe(s);
  }

  function lost() {
    status.textContent =
      "Your edit lock is gone (it ran out, was released, or was taken over): saving will not " +
      "work. Copy your text, then open the editor again.";
    status.className = "notice error";
    status.setAttribute("role", "alert");
  }

  async function renew() {
    let response;
    try {
      response = await fetch(form.dataset.renew, {
        method: "POST",
        headers: { "X-CSRF-Token": token },
        credentials: "same-origin",
      });
    } catch (e) {
      setTimeout(renew, 5000);  // offline for a moment: try again soon
      return;
    }
    if (response.status === 409) {
      lost();
      return;
    }
    if (!response.ok) {
      setTimeout(renew, 5000);
      return;
    }
    const answer = await response.json();
    deadline = Date.now() + answer.left_s * 1000;
    // Renewed after a third of the time left: two more tries before it runs out.
    setTimeout(renew, Math.max(1000, (answer.left_s * 1000) / 3));
  }

  setInterval(tick, 1000);
  setTimeout(renew, Math.max(1000, (ttl * 1000) / 3));
})();
