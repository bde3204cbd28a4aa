/** Tailwind configuration for Handoff Desk, read by static/css/input.css through @config. */
module.exports = {
  content: ["./views/**/*.templ", "./static/js/**/*.js"],
  theme: {
    extend: {
      fontFamily: {
        sans: ["Inter", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
        mono: ["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
      },
    },
  },
};
