// The console's pages in the navigation's order: each module exports {id, title, render}.
import workspace from './pages/workspace.js';
import webhooks from './pages/webhooks.js';

export const pages = [workspace, webhooks];
