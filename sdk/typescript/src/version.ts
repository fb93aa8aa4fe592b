/** The package version, sent as the User-Agent and printed by `neens-eval --version`. */
export const VERSION = "0.1.0";
