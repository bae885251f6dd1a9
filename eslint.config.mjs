// ESLint for the book's browser code (book/_static; `make lint`), pinned in package.json.
// The files are classic scripts (pages must work opened from disk, where browsers refuse module
// scripts); each also exports itself for node's test runner through `module` when it exists.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["_build/**", "node_modules/**", "book/_static/vendor/**"] },
  js.configs.recommended,
  {
    files: ["book/_static/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "script",
      globals: { ...globals.browser, ...globals.worker, module: "writable", require: "readonly" },
    },
    rules: {
      "no-unused-vars": ["error", { args: "after-used" }],
    },
  },
  {
    files: ["tests/js/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "commonjs", globals: { ...globals.node } },
  },
];
