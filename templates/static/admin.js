// Lock admin page: click a column header to sort its table (numbers by data-value when a
// cell has one). The sort is remembered across the page's 5 s auto-refresh in sessionStorage.
"use strict";
(function () {
  function cellValue(row, index, numeric) {
    const cell = row.cells[index];
    if (!cell) return numeric ? 0 : "";
    const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
    return numeric ? parseFloat(raw) || 0 : raw.toLowerCase();
  }

  function sortTable(table, index, descending) {
    const th = table.tHead.rows[0].cells[index];
    const numeric = th.dataset.type === "number";
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort(function (a, b) {
      const x = cellValue(a, index, numeric);
      const y = cellValue(b, index, numeric);
      const order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.from(table.tHead.rows[0].cells).forEach(function (c) {
      c.classList.remove("sorted-asc", "sorted-desc");
    });
    th.classList.add(descending ? "sorted-desc" : "sorted-asc");
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    const key = "kagi-admin-sort-" + table.id;
    Array.from(table.tHead.rows[0].cells).forEach(function (th, index) {
      th.addEventListener("click", function () {
        const descending = th.classList.contains("sorted-asc");
        sortTable(table, index, descending);
        sessionStorage.setItem(key, JSON.stringify({ index: index, descending: descending }));
      });
    });
    const saved = sessionStorage.getItem(key);
    if (saved) {
      try {
        const s = JSON.parse(saved);
        if (s.index < table.tHead.rows[0].cells.length) sortTable(table, s.index, s.descending);
      } catch (e) {
        sessionStorage.removeItem(key);
      }
    }
  });
})();
