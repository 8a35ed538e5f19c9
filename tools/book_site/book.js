// Renders the math that pymdownx.arithmatex marked (\( … \) inline, \[ … \] display) with the
// KaTeX that the build copied next to the site, so the site needs no network.
function courseRenderMath() {
  if (typeof katex === "undefined") return;
  document.querySelectorAll(".arithmatex").forEach(function (el) {
    if (el.dataset.rendered) return;
    var tex = el.textContent.trim();
    var display = tex.startsWith("\\[");
    tex = tex.replace(/^\\[\[(]/, "").replace(/\\[\])]$/, "");
    katex.render(tex, el, { displayMode: display, throwOnError: false });
    el.dataset.rendered = "1";
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(courseRenderMath);  // material's instant navigation
} else {
  document.addEventListener("DOMContentLoaded", courseRenderMath);
}
