// A tap (or click) on a figure's image opens the image itself at full size: on a phone a wide
// figure is scaled down to the column, and the full-size image can be zoomed and panned. A
// figure with the class tap-to-open (tests/support/figures.py's TAP_TO_OPEN: too wide to be
// legible in a phone's column) also gets a hint under its image, which custom.css shows on
// narrow screens only.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll(".bd-article figure img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "figure-zoom";
    link.title = "Open the figure full size";
    img.replaceWith(link);
    link.append(img);
    if (img.closest("figure").classList.contains("tap-to-open")) {
      const hint = document.createElement("span");
      hint.className = "figure-zoom-hint";
      hint.textContent = "Tap the figure to open it full size.";
      link.append(hint);
    }
  }
});
