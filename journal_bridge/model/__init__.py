"""The journal's data: the record envelope, one definition per event type, timestamps."""
