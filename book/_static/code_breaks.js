// Long inline code (torch.nn.functional.scaled_dot_product_attention, key_padding_mask) may
// wrap on a phone (custom.css). Without help the browser breaks it anywhere, mid-word
// (scaled_dot_pro|duct); a <wbr> after each dot, underscore and comma, and before each opening
// bracket, lets it break between the parts of the name instead. <wbr> adds no character, so
// copied code is unchanged.
document.addEventListener("DOMContentLoaded", () => {
  for (const span of document.querySelectorAll(".bd-article code.literal span.pre")) {
    const text = span.textContent;
    if (text.length < 12 || span.children.length) continue;
    const parts = text.split(/(?<=[._,])|(?=[([])/);
    if (parts.length < 2) continue;
    span.textContent = "";
    parts.forEach((part, index) => {
      if (index) span.append(document.createElement("wbr"));
      span.append(part);
    });
  }
});
