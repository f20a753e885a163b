// What the JavaScript clients of the end-to-end tests share.

// Compacts early, so a conversation of a few turns goes through summarization.
export const EARLY_SUMMARIZATION = {
  configurable: {
    summarization: {
      enabled: true,
      trigger: [{ type: "messages", value: 6 }],
      keep: { type: "messages", value: 3 },
    },
  },
};

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
