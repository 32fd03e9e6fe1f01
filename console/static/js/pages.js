// The console's pages in the navigation's order: each module exports {id, title, render}.
import workspace from './pages/workspace.js';
import organizations from './pages/organizations.js';
import activity from './pages/activity.js';
import notifications from './pages/notifications.js';

export const pages = [workspace, organizations, activity, notifications];
