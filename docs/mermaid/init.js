// Draws the site's ```mermaid fences with mermaid.min.js beside this file (mermaid 11.17.2
// from npm's `mermaid` package, MIT: LICENSE), so the site needs no network.
// pymdownx.superfences writes a fence as <pre class="mermaid"><code>...</code></pre>;
// mermaid wants the diagram's text alone, so each becomes a <div class="mermaid">.
document.addEventListener("DOMContentLoaded", () => {
  for (const pre of document.querySelectorAll("pre.mermaid")) {
    const div = document.createElement("div");
    div.className = "mermaid";
    div.textContent = pre.textContent;
    pre.replaceWith(div);
  }
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
  mermaid.run({ querySelector: "div.mermaid" });
});
