/* SPDX-License-Identifier: MIT */
#pragma once

/* Intrusive doubly-linked lists, after systemd's list.h: an item has the
 * fields name##_prev and name##_next, the list is a head pointer. */

#define LIST_PREPEND(name, head, item)                                  \
        do {                                                            \
                __typeof__(*(head)) **_head = &(head), *_item = (item); \
                _item->name##_prev = NULL;                              \
                _item->name##_next = *_head;                            \
                if (*_head)                                             \
                        (*_head)->name##_prev = _item;                  \
                *_head = _item;                                         \
        } while (0)

#define LIST_REMOVE(name, head, item)                                         \
        do {                                                                  \
                __typeof__(*(head)) **_head = &(head), *_item = (item);       \
                if (_item->name##_next)                                       \
                        _item->name##_next->name##_prev = _item->name##_prev; \
                if (_item->name##_prev)                                       \
                        _item->name##_prev->name##_next = _item->name##_next; \
                else                                                          \
                        *_head = _item->name##_next;                          \
                _item->name##_next = _item->name##_prev = NULL;               \
        } while (0)
