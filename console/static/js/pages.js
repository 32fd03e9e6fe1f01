// The console's pages in the navigation's order: each module exports {id, title, render}.
import workspace from './pages/workspace.js';
import organizations from './pages/organizations.js';
import activity from './pages/activity.js';
import notifications from './pages/notifications.js';
import webhooks from './pages/webhooks.js';
import comments from './pages/comments.js';
import crdt from './pages/crdt.js';
import memory from './pages/memory.js';

export const pages = [workspace, organizations, webhooks, activity, notifications, comments, crdt, memory];
