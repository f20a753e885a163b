"""The journal's HTTP routes, their OpenAPI description, access checks, the viewer and history.js."""
