package agenthub

// OnMessage makes fn handle agents' messages of type typ, as a declared Message would; a type
// the hub or another domain handles panics.
func (h *Hub) OnMessage(typ string, fn MessageHandler) {
	if err := h.handle(typ, fn); err != nil {
		panic(err)
	}
}
