// A tap (or click) on a figure's image opens the image itself at full size: on a phone a wide
// figure is scaled down to the column, and the full-size image can be zoomed and panned.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll(".bd-article figure img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "figure-zoom";
    link.title = "Open the figure full size";
    img.replaceWith(link);
    link.append(img);
  }
});
