"""The words of a template slot written in the languages a team writes in (docs/leakage.md).

One table per language, one row per part a slot phrase is built from; ``checks/placeholders.py``
reads the unions (``WORDS``) and owns the rules. English keeps its own finer tables in
placeholders.py (its near misses are many and known: red team 2); the words here are matched
lower-cased, after the normalisation ``placeholders`` applies (hyphens split words, "e-mail" is
"email", French and Italian elisions and the Arabic article are taken off).

Parts (each a frozenset of lower-case words, or of short phrases where noted):

- ``alone``: a slot on its own (``[Datum]``, ``[Prénom]``, ``[이름]``); phrases of two words
  allowed (``fecha límite``, ``nombre completo``);
- ``heads``: a slot noun that takes modifiers after it (``[Nom du projet]``, ``[Имя получателя]``)
  or, in ``heads_last``, before it (``[받는 사람 이름]``, ``[Полное имя]``);
- ``possessives``: "your" and its kin before a slot noun (``[Ihr Name]``, ``[Votre nom]``);
- ``nouns``: what the scaffold's slots name (the goal, the task, the team, a role, a message), a
  slot after "your" or "current" in either order (``[Ihr Ziel]``, ``[Objectif actuel]``,
  ``[Текущая задача]``), as English's ``SLOT_NOUNS`` after ``SLOT_PREFIXES``; ``world``: a room
  or a position, a slot only after "your" (``[Votre salle]``; ``[Aktueller Raum]`` is a label);
- ``current``: "current" and its kin; ``yours``: "your" written after the noun (``[Mục tiêu
  của bạn]``, ``[המטרה שלך]``); ``yours_nouns``: a noun with "your" as its suffix, a slot on its own
  and after "current" (``[Göreviniz]``, ``[مهمتك]``, ``[Jelenlegi célod]``);
- ``verbs``: an instruction to fill the slot, first or last (``[Insérer le lien]``,
  ``[Link hier einfügen]``);
- ``asked``: what an instruction may ask for besides the nouns (a link, the goal);
- ``links``: the small words between a head and its object (``des``, ``du``, ``del``, ``van``);
- ``objects``: whose name, date or address it is (``[Name des Empfängers]``);
- ``articles``: skipped at the start of a phrase and between its words;
- ``here``: "here", skipped anywhere;
- ``roles``: a person's role or a deadline, a slot only in a value's place (``Assigned to
  [OWNER]``, ``Responsable: [RESPONSABLE]``), not as a line's label (``[OWNER] Ada``);
- ``suffixes``: the end of a compound that names a slot (``Projektname``, ``Startdatum``,
  ``voornaam``);
- ``ui_verbs``: an interface verb that makes a button of a slot noun (``[Namen ändern]``);
- ``greetings``: a word before a value's place (``Hallo {0}``);
- ``honorifics``: a word after a name, which a label's value never is (``[नाम] जी``, ``【氏名】様``).

For Chinese and Japanese (no spaces between words) the same parts are matched on characters:
``heads`` as the end of the bracket's text (``【担当者名】``, ``［截止日期］``), ``possessives``,
``here``, ``current`` and ``verbs`` as its start or end (``[您的姓名]``, ``【ここにリンクを挿入】``),
``nouns`` and ``world`` as what is left after "your" (a possessive in the genitive, ``您的``,
``あなたの``) or "current" (``[当前目标]``, ``【現在の目標】``).
"""

from __future__ import annotations

from collections.abc import Mapping


def _w(*words: str) -> frozenset[str]:
    return frozenset(words)


SLOT_WORDS: Mapping[str, Mapping[str, frozenset[str]]] = {
    "en": {
        # only what the English rules in placeholders.py do not hold
        "alone": _w("url", "link", "surname", "firstname", "lastname", "full name", "first name", "last name"),
        "asked": _w("link", "url", "goal", "objective"),
        "links": _w("to", "for"),
        "roles": _w(
            *("owner", "assignee", "deadline", "reviewer", "teammate", "sender", "approver", "manager"),
            *("responsible", "contact", "customer", "client", "agent", "member", "recipient"),
        ),
        "ui_verbs": _w("rename"),
        "greetings": _w("hi", "hello", "hey", "dear", "welcome", "greetings"),
    },
    "de": {
        "alone": _w(
            *("name", "namen", "vorname", "nachname", "datum", "uhrzeit", "ort", "adresse", "firma", "email"),
            *("telefonnummer", "unterschrift", "empfänger", "absender", "betreff", "vollständiger name"),
            *("unternehmen", "telefon"),
        ),
        "heads": _w("name", "namen", "datum", "adresse", "nummer", "email", "link", "titel", "bezeichnung", "ort"),
        "heads_last": _w("name", "namen", "adresse", "nummer", "datum"),
        "possessives": _w("ihr", "ihre", "ihren", "ihrem", "ihrer", "dein", "deine", "deinen", "euer", "eure"),
        "nouns": _w(
            *("ziel", "aufgabe", "auftrag", "thema", "team", "projekt", "rolle", "nachricht", "agent"),
            *("benutzer", "nutzer", "mitglied"),
        ),
        "world": _w("raum", "zimmer", "position"),
        "current": _w(
            *("aktuell", "aktuelle", "aktuelles", "aktueller", "aktuellen", "derzeitige", "derzeitiges"),
            *("derzeitiger", "jetzige", "jetziges", "jetziger"),
        ),
        "verbs": _w("einfügen", "eingeben", "eintragen", "einsetzen", "ergänzen", "ausfüllen", "angeben"),
        "asked": _w("link", "ziel", "text", "details", "angaben"),
        "links": _w("des", "der", "vom", "von", "zum", "zur", "für", "zu"),
        "objects": _w(
            *("agenten", "benutzers", "nutzers", "mitglieds", "spielers"),
            *("empfängers", "empfänger", "absenders", "absender", "projekts", "projektes", "projekt"),
            *("unternehmens", "firma", "kunden", "teams", "ansprechpartners", "veranstaltung", "dokument"),
            *("termins", "treffens", "mitarbeiters", "veranstaltung", "unternehmens"),
        ),
        "articles": _w("der", "die", "das", "den", "dem"),
        "here": _w("hier"),
        "roles": _w(
            *("verantwortlicher", "verantwortliche", "zuständiger", "zuständige", "frist", "empfänger"),
            *("absender", "ansprechpartner", "ansprechpartnerin", "bearbeiter", "termin"),
        ),
        "suffixes": _w("name", "namen", "datum", "adresse", "nummer"),
        "ui_verbs": _w("ändern", "bearbeiten", "umbenennen", "anzeigen", "löschen", "speichern"),
        "greetings": _w("hallo", "liebe", "lieber", "hi", "servus", "moin"),
    },
    "fr": {
        "alone": _w(
            *("nom", "prénom", "date", "heure", "lieu", "adresse", "email", "signature", "entreprise"),
            *("destinataire", "expéditeur", "nom complet", "téléphone"),
        ),
        "heads": _w("nom", "prénom", "date", "adresse", "email", "numéro", "lien", "titre", "heure", "lieu"),
        "possessives": _w("votre", "vos", "ton", "ta", "tes"),
        "nouns": _w(
            *("objectif", "but", "tâche", "mission", "sujet", "équipe", "projet", "rôle", "message", "agent"),
            *("utilisateur", "membre", "cible"),
        ),
        "world": _w("salle", "pièce", "position"),
        "current": _w("actuel", "actuelle", "courant", "courante"),
        "verbs": _w("insérer", "insérez", "insère", "saisir", "saisissez", "ajouter", "ajoutez", "indiquer"),
        "asked": _w("lien", "objectif", "but", "texte", "détails", "informations"),
        "links": _w("de", "du", "des", "vers", "pour", "à"),
        "objects": _w(
            *("destinataire", "expéditeur", "projet", "entreprise", "société", "équipe", "client"),
            *("responsable", "document", "réunion", "événement", "contact", "formulaire"),
        ),
        "articles": _w("le", "la", "les", "l'", "un", "une"),
        "here": _w("ici"),
        "roles": _w("responsable", "destinataire", "expéditeur", "échéance", "propriétaire", "interlocuteur"),
        "ui_verbs": _w("modifier", "renommer", "changer", "afficher", "supprimer", "enregistrer"),
        "greetings": _w("bonjour", "salut", "cher", "chère", "bonsoir", "coucou"),
    },
    "es": {
        "alone": _w(
            *("nombre", "apellido", "fecha", "hora", "lugar", "dirección", "correo", "firma", "empresa"),
            *("destinatario", "remitente", "fecha límite", "nombre completo", "teléfono", "correo electrónico"),
        ),
        "heads": _w("nombre", "fecha", "dirección", "correo", "número", "enlace", "título", "hora", "lugar"),
        "possessives": _w("tu", "su", "tus", "sus", "vuestro", "vuestra"),
        "nouns": _w(
            *("objetivo", "meta", "tarea", "misión", "tema", "equipo", "proyecto", "rol", "papel", "mensaje"),
            *("agente", "usuario", "miembro"),
        ),
        "world": _w("sala", "habitación", "posición"),
        "current": _w("actual", "vigente"),
        "verbs": _w("insertar", "inserte", "inserta", "introducir", "introduzca", "añadir", "añade", "agregar"),
        "asked": _w("enlace", "objetivo", "meta", "texto", "detalles", "información"),
        "links": _w("de", "del", "para", "al", "a"),
        "objects": _w(
            *("destinatario", "remitente", "proyecto", "empresa", "equipo", "cliente", "responsable"),
            *("documento", "reunión", "evento", "contacto", "formulario"),
        ),
        "articles": _w("el", "la", "los", "las", "un", "una"),
        "here": _w("aquí", "aqui"),
        "roles": _w("responsable", "destinatario", "remitente", "plazo", "encargado", "encargada", "propietario"),
        "ui_verbs": _w("cambiar", "editar", "modificar", "renombrar", "mostrar", "borrar", "guardar"),
        "greetings": _w("hola", "estimado", "estimada", "querido", "querida", "buenos"),
    },
    "pt": {
        "alone": _w(
            *("nome", "sobrenome", "data", "hora", "horário", "local", "endereço", "email", "assinatura"),
            *("empresa", "destinatário", "remetente", "prazo", "nome completo", "telefone"),
        ),
        "heads": _w("nome", "data", "endereço", "email", "número", "link", "título", "hora", "local"),
        "possessives": _w("seu", "sua", "seus", "suas", "teu", "tua", "vosso", "vossa"),
        "nouns": _w(
            *("objetivo", "meta", "tarefa", "missão", "tema", "assunto", "equipe", "equipa", "projeto"),
            *("papel", "função", "mensagem", "agente", "usuário", "utilizador", "membro"),
        ),
        "world": _w("sala", "quarto", "posição"),
        "current": _w("atual", "actual", "corrente"),
        "verbs": _w("inserir", "insira", "insere", "adicionar", "adicione", "preencher", "preencha", "digite"),
        "asked": _w("link", "objetivo", "meta", "texto", "detalhes", "informações"),
        "links": _w("de", "do", "da", "dos", "das", "para", "ao", "à"),
        "objects": _w(
            *("destinatário", "remetente", "projeto", "empresa", "equipe", "equipa", "cliente"),
            *("responsável", "documento", "reunião", "evento", "contato", "formulário"),
        ),
        "articles": _w("o", "a", "os", "as", "um", "uma"),
        "here": _w("aqui"),
        "roles": _w("responsável", "destinatário", "remetente", "prazo", "encarregado", "proprietário"),
        "ui_verbs": _w("alterar", "editar", "mudar", "renomear", "mostrar", "apagar", "salvar"),
        "greetings": _w("olá", "oi", "prezado", "prezada", "caro", "cara"),
    },
    "it": {
        "alone": _w(
            *("nome", "cognome", "data", "ora", "orario", "luogo", "indirizzo", "email", "firma", "azienda"),
            *("destinatario", "mittente", "scadenza", "nome completo", "telefono"),
        ),
        "heads": _w("nome", "data", "indirizzo", "email", "numero", "link", "titolo", "ora", "luogo"),
        "possessives": _w("tuo", "tua", "tuoi", "vostro", "vostra", "suo", "sua"),
        "nouns": _w(
            *("obiettivo", "scopo", "compito", "missione", "argomento", "tema", "squadra", "team", "progetto"),
            *("ruolo", "messaggio", "agente", "utente", "membro"),
        ),
        "world": _w("stanza", "sala", "posizione"),
        "current": _w("attuale", "corrente"),
        "verbs": _w("inserire", "inserisci", "inserisca", "aggiungere", "aggiungi", "compilare", "scrivi"),
        "asked": _w("link", "obiettivo", "testo", "dettagli", "informazioni"),
        "links": _w("di", "del", "della", "dello", "dei", "degli", "delle", "per", "al", "alla"),
        "objects": _w(
            *("destinatario", "mittente", "progetto", "azienda", "squadra", "team", "cliente"),
            *("responsabile", "documento", "riunione", "evento", "contatto", "modulo"),
        ),
        "articles": _w("il", "lo", "la", "i", "gli", "le", "l'", "un", "una"),
        "here": _w("qui", "qua"),
        "roles": _w("responsabile", "destinatario", "mittente", "scadenza", "incaricato", "referente"),
        "ui_verbs": _w("modificare", "modifica", "cambiare", "rinominare", "mostra", "elimina", "salva"),
        "greetings": _w("ciao", "gentile", "caro", "cara", "salve", "buongiorno"),
    },
    "nl": {
        "alone": _w(
            *("naam", "voornaam", "achternaam", "datum", "tijd", "locatie", "adres", "email", "handtekening"),
            *("bedrijf", "ontvanger", "afzender", "volledige naam", "telefoonnummer"),
        ),
        "heads": _w("naam", "datum", "adres", "email", "nummer", "link", "titel", "tijd", "locatie"),
        "heads_last": _w("naam", "adres", "nummer", "datum"),
        "possessives": _w("uw", "je", "jouw", "jullie"),
        "nouns": _w("doel", "taak", "opdracht", "onderwerp", "team", "project", "rol", "agent", "gebruiker", "lid"),
        "world": _w("kamer", "ruimte", "positie"),
        "current": _w("huidig", "huidige"),
        "verbs": _w("invoegen", "voeg", "invullen", "vul", "toevoegen", "plaatsen", "invoeren"),
        "asked": _w("link", "doel", "tekst", "details", "gegevens"),
        "links": _w("van", "voor", "naar"),
        "objects": _w(
            *("ontvanger", "afzender", "project", "bedrijf", "team", "klant", "verantwoordelijke"),
            *("document", "vergadering", "evenement", "contactpersoon", "formulier"),
        ),
        "articles": _w("de", "het", "een"),
        "here": _w("hier"),
        "roles": _w("eigenaar", "deadline", "ontvanger", "afzender", "verantwoordelijke", "contactpersoon"),
        "suffixes": _w("naam", "datum", "adres", "nummer"),
        "ui_verbs": _w("wijzigen", "bewerken", "hernoemen", "tonen", "verwijderen", "opslaan"),
        "greetings": _w("hallo", "beste", "hoi", "dag"),
    },
    "ru": {
        "alone": _w(
            *("имя", "фио", "фамилия", "дата", "время", "место", "адрес", "подпись", "компания", "телефон"),
            *("получатель", "отправитель", "полное имя", "электронная почта"),
        ),
        "heads": _w("имя", "название", "дата", "адрес", "номер", "ссылка", "время", "место", "фамилия"),
        "heads_last": _w("имя", "название", "дата", "адрес", "номер"),
        "possessives": _w("ваше", "ваш", "ваша", "ваши", "твое", "твоё", "твой", "твоя"),
        "nouns": _w(
            *("цель", "задача", "задание", "тема", "проект", "роль", "сообщение", "агент", "пользователь"),
            *("участник",),
        ),
        "world": _w("комната", "позиция"),
        "current": _w("текущий", "текущая", "текущее", "нынешний", "нынешняя", "нынешнее"),
        "verbs": _w("вставить", "вставьте", "введите", "ввести", "укажите", "указать", "добавить", "добавьте"),
        "asked": _w("ссылку", "ссылка", "цель", "текст", "описание"),
        "links": _w("на", "для", "к"),
        "objects": _w(
            *("агента", "пользователя", "участника", "игрока"),
            *("получателя", "отправителя", "проекта", "компании", "команды", "клиента", "документа"),
            *("встречи", "мероприятия", "ответственного", "организации"),
        ),
        "here": _w("здесь", "сюда"),
        "roles": _w("ответственный", "ответственная", "срок", "получатель", "отправитель", "исполнитель"),
        "ui_verbs": _w("изменить", "редактировать", "переименовать", "показать", "удалить", "сохранить"),
        "greetings": _w("привет", "здравствуйте", "уважаемый", "уважаемая", "дорогой", "дорогая"),
    },
    "ko": {
        "alone": _w(
            *(
                "이름",
                "성명",
                "날짜",
                "시간",
                "장소",
                "주소",
                "이메일",
                "연락처",
                "회사명",
                "마감일",
                "전화번호",
                "서명",
                "팀명",
                "프로젝트명",
            ),
            *("제품명", "받는 사람", "보내는 사람"),
        ),
        "heads": _w("이름", "주소", "날짜", "번호", "링크"),
        "heads_last": _w("이름", "주소", "날짜", "번호", "시간", "장소"),
        "possessives": _w("귀하의", "당신의", "여러분의", "본인의"),
        "nouns": _w(
            "목표",
            "과제",
            "작업",
            "임무",
            "주제",
            "팀",
            "프로젝트",
            "역할",
            "메시지",
            "에이전트",
            "사용자",
            "멤버",
            "구성원",
        ),
        "world": _w("방", "위치"),
        "current": _w("현재", "현재의", "지금의"),
        "verbs": _w("삽입", "입력", "기입", "추가", "작성"),
        "asked": _w("링크", "목표", "내용"),
        "here": _w("여기에", "여기", "이곳에"),
        "roles": _w("담당자", "책임자", "수신자", "발신자", "받는사람", "마감"),
        "greetings": _w("안녕하세요", "안녕"),
    },
    "ar": {
        # matched without the article "ال" (الاسم -> اسم, المستلم -> مستلم)
        "alone": _w(
            *("اسم", "اسمك", "تاريخ", "وقت", "مكان", "عنوان", "توقيع", "شركة", "مستلم", "مرسل"),
            *("بريد إلكتروني", "موعد نهائي", "اسم كامل", "هاتف", "رقم هاتف"),
        ),
        "heads": _w("اسم", "تاريخ", "عنوان", "رقم", "رابط", "بريد"),
        "possessives": _w("اسمك", "عنوانك", "بريدك"),
        "nouns": _w("هدف", "مهمة", "موضوع", "فريق", "مشروع", "رسالة", "وكيل", "مستخدم", "عضو"),
        "yours_nouns": _w("هدفك", "مهمتك", "رسالتك", "فريقك"),
        "world": _w("غرفة", "موقع"),
        "current": _w("حالي", "حالية"),
        "verbs": _w("أدخل", "ادخل", "أضف", "اكتب", "ضع", "إدراج", "أدرج"),
        "asked": _w("رابط", "هدف", "نص", "تفاصيل"),
        "links": _w("إلى", "ل"),
        "objects": _w("مستلم", "مرسل", "مشروع", "شركة", "فريق", "عميل", "مسؤول", "اجتماع", "حدث", "مستند"),
        "here": _w("هنا"),
        "roles": _w("مسؤول", "مستلم", "مرسل", "موعد", "منسق"),
        "greetings": _w("مرحبا", "عزيزي", "عزيزتي", "أهلا"),
        "honorifics": _w("المحترم", "المحترمة"),
    },
    "hi": {
        "alone": _w(
            *("नाम", "पूरा नाम", "तारीख", "तिथि", "दिनांक", "समय", "स्थान", "जगह", "पता", "ईमेल", "फ़ोन"),
            *("फोन", "फ़ोन नंबर", "फोन नंबर", "हस्ताक्षर", "कंपनी", "प्राप्तकर्ता", "प्रेषक"),
        ),
        "heads": _w("नाम", "तारीख", "पता", "नंबर", "लिंक", "ईमेल", "समय", "स्थान"),
        "heads_last": _w("नाम", "तारीख", "पता", "नंबर", "समय", "स्थान"),
        "possessives": _w("आपका", "आपकी", "आपके", "तुम्हारा", "तुम्हारी", "अपना", "अपनी"),
        "nouns": _w(
            *("लक्ष्य", "कार्य", "काम", "विषय", "टीम", "परियोजना", "प्रोजेक्ट", "भूमिका", "संदेश", "एजेंट"),
            *("उपयोगकर्ता", "सदस्य"),
        ),
        "world": _w("कमरा"),
        "current": _w("वर्तमान", "मौजूदा"),
        "verbs": _w("डालें", "लिखें", "जोड़ें", "दर्ज", "भरें", "डालिए", "लिखिए", "करें"),
        "asked": _w("लिंक", "लक्ष्य", "विवरण"),
        "here": _w("यहाँ", "यहां"),
        "roles": _w("ज़िम्मेदार", "जिम्मेदार", "प्राप्तकर्ता", "प्रेषक", "समयसीमा"),
        "greetings": _w("नमस्ते", "नमस्कार", "प्रिय"),
        "honorifics": _w("जी", "साहब", "साहिबा", "महोदय", "महोदया"),
    },
    "tr": {
        # "İ" lower-cased is "i" and a combining dot: placeholders takes the dot off
        "alone": _w(
            *("adınız", "adiniz", "adı", "isim", "isminiz", "ad soyad", "adı soyadı", "soyad", "soyadı"),
            *("tarih", "saat", "yer", "adres", "e posta", "eposta", "telefon", "imza", "şirket", "alıcı"),
            *("gönderen", "konum", "tam ad", "son tarih"),
        ),
        "heads": _w("adı", "tarih", "adres", "numara", "bağlantı", "saat", "yer"),
        "heads_last": _w("adı", "adınız", "tarihi", "numarası", "adresi", "saati", "yeri"),
        "possessives": _w("sizin", "senin"),
        "nouns": _w("hedef", "görev", "konu", "takım", "ekip", "proje", "rol", "mesaj", "ajan", "kullanıcı", "üye"),
        "yours_nouns": _w("hedefiniz", "hedefin", "göreviniz", "görevin", "rolünüz", "rolün", "mesajınız"),
        "world": _w("oda", "konum"),
        "current": _w("mevcut", "güncel", "geçerli", "şu anki"),
        "verbs": _w("ekle", "ekleyin", "girin", "gir", "yazın", "yaz", "yapıştır", "yapıştırın", "doldurun"),
        "asked": _w("bağlantı", "bağlantıyı", "link", "linki", "hedef", "metin", "ayrıntılar"),
        "here": _w("buraya", "burada"),
        "roles": _w("sorumlu", "alıcı", "gönderen", "son tarih"),
        "greetings": _w("merhaba", "sayın", "sevgili", "selam"),
    },
    "pl": {
        "alone": _w(
            *("imię", "nazwisko", "imię i nazwisko", "data", "godzina", "miejsce", "adres", "email", "telefon"),
            *("podpis", "firma", "odbiorca", "nadawca", "pełne imię", "numer telefonu"),
        ),
        "heads": _w("imię", "nazwa", "data", "adres", "numer", "link", "godzina", "miejsce", "nazwisko"),
        "possessives": _w("twoje", "twój", "twoja", "wasze", "wasz", "pana", "pani"),
        "nouns": _w(
            *("cel", "zadanie", "temat", "zespół", "drużyna", "projekt", "rola", "wiadomość", "agent"),
            *("użytkownik", "członek"),
        ),
        "world": _w("pokój", "pozycja"),
        "current": _w(
            *("obecny", "obecna", "obecne", "bieżący", "bieżąca", "bieżące", "aktualny", "aktualna"),
            *("aktualne",),
        ),
        "verbs": _w("wstaw", "wpisz", "dodaj", "podaj", "uzupełnij", "wprowadź", "wklej", "wstawić", "wpisać"),
        "asked": _w("link", "cel", "tekst", "szczegóły", "odnośnik"),
        "links": _w("do", "dla"),
        "objects": _w(
            *("agenta", "użytkownika", "członka", "gracza"),
            *("odbiorcy", "nadawcy", "projektu", "firmy", "zespołu", "klienta", "spotkania", "telefonu"),
            *("wydarzenia", "dokumentu"),
        ),
        "here": _w("tutaj", "tu"),
        "roles": _w("odpowiedzialny", "odpowiedzialna", "odbiorca", "nadawca", "termin"),
        "greetings": _w("cześć", "witaj", "drogi", "droga", "szanowny", "szanowna", "hej"),
    },
    "vi": {
        # words of one syllable each, written apart: a slot noun is often two of them
        "alone": _w(
            *("tên", "họ tên", "họ và tên", "ngày", "giờ", "thời gian", "địa điểm", "địa chỉ", "email"),
            *("số điện thoại", "chữ ký", "công ty", "người nhận", "người gửi", "hạn chót"),
        ),
        "heads": _w("tên", "ngày", "số", "giờ", "email"),
        "nouns": _w(
            *("mục tiêu", "nhiệm vụ", "chủ đề", "đội", "nhóm", "dự án", "vai trò", "tin nhắn", "người dùng"),
            *("thành viên",),
        ),
        "world": _w("phòng", "vị trí"),
        "current": _w("hiện tại", "hiện nay"),
        "yours": _w("của bạn", "của các bạn"),
        "verbs": _w("chèn", "nhập", "điền", "thêm", "dán", "ghi"),
        "asked": _w("liên kết", "link", "mục tiêu", "nội dung"),
        "links": _w("của", "cho"),
        "objects": _w("bạn", "anh", "chị", "người nhận", "người gửi", "dự án", "công ty", "khách hàng", "cuộc họp"),
        "here": _w("vào đây", "tại đây", "đây"),
        "roles": _w("người phụ trách", "người nhận", "người gửi", "hạn chót"),
        "greetings": _w("chào", "gửi"),
    },
    "cs": {
        "alone": _w(
            *("jméno", "příjmení", "celé jméno", "jméno a příjmení", "datum", "čas", "místo", "adresa"),
            *("email", "telefon", "podpis", "firma", "příjemce", "odesílatel", "termín"),
        ),
        "heads": _w("jméno", "název", "datum", "adresa", "číslo", "odkaz", "čas", "místo"),
        "possessives": _w("vaše", "váš", "vaši", "tvoje", "tvé", "tvůj"),
        "nouns": _w("cíl", "úkol", "téma", "tým", "projekt", "role", "zpráva", "agent", "uživatel", "člen"),
        "world": _w("místnost", "pozice"),
        "current": _w("aktuální", "současný", "současná", "současné"),
        "verbs": _w("vložte", "vložit", "zadejte", "doplňte", "napište", "přidejte", "vyplňte"),
        "asked": _w("odkaz", "cíl", "text", "podrobnosti"),
        "links": _w("pro", "na"),
        "objects": _w(
            "příjemce",
            "odesílatele",
            "projektu",
            "firmy",
            "týmu",
            "klienta",
            "schůzky",
            "akce",
            "telefonu",
            "agenta",
            "uživatele",
            "člena",
            "hráče",
        ),
        "here": _w("sem", "zde"),
        "roles": _w("odpovědná osoba", "příjemce", "odesílatel", "termín"),
        "greetings": _w("ahoj", "milý", "milá", "vážený", "vážená"),
    },
    "hu": {
        "alone": _w(
            *("név", "neve", "neved", "teljes név", "dátum", "időpont", "helyszín", "cím", "email"),
            *("telefonszám", "aláírás", "cég", "címzett", "feladó", "határidő"),
        ),
        "heads_last": _w("név", "neve", "címe", "dátum", "dátuma", "száma", "időpontja"),
        "possessives": _w("ön", "az ön", "te", "a te"),
        "nouns": _w(
            *("cél", "célja", "feladat", "feladata", "téma", "csapat", "projekt", "szerep", "szerepe"),
            *("üzenet", "ügynök", "felhasználó"),
        ),
        "yours_nouns": _w("célod", "feladatod", "szereped", "üzeneted"),
        "world": _w("szoba", "pozíció"),
        "current": _w("jelenlegi", "aktuális"),
        "verbs": _w("illessze", "írja", "adja", "beszúrása", "beillesztése", "szúrja", "töltse"),
        "asked": _w("link", "linket", "hivatkozás", "hivatkozást", "cél", "szöveg"),
        "articles": _w("a", "az"),
        "here": _w("ide", "itt"),
        "roles": _w("felelős", "címzett", "feladó", "határidő"),
        "greetings": _w("kedves", "szia", "tisztelt", "helló", "üdv"),
    },
    "he": {
        "alone": _w(
            *("שם", "שם מלא", "תאריך", "שעה", "מקום", "כתובת", "טלפון", "חתימה", "חברה", "נמען", "שולח", "השם"),
            *("התאריך", "השעה", "המקום", "מספר טלפון", "שם פרטי", "שם משפחה"),
        ),
        "heads": _w("שם", "השם", "תאריך", "כתובת", "מספר", "קישור", "שעת", "מקום"),
        "nouns": _w(
            *("מטרה", "המטרה", "משימה", "המשימה", "נושא", "הנושא", "צוות", "הצוות", "פרויקט", "הפרויקט"),
            *("תפקיד", "התפקיד", "הודעה", "ההודעה", "סוכן", "הסוכן", "משתמש", "המשתמש"),
        ),
        "yours_nouns": _w("מטרתך", "משימתך", "תפקידך"),
        "world": _w("חדר", "החדר", "מיקום", "המיקום"),
        "current": _w("נוכחי", "נוכחית", "הנוכחי", "הנוכחית"),
        "yours": _w("שלך", "שלכם", "שלכן"),
        "verbs": _w("הכנס", "הכניסו", "הוסף", "הוסיפו", "הזן", "הזינו", "כתוב", "כתבו"),
        "asked": _w("קישור", "הקישור", "מטרה", "טקסט", "פרטים"),
        "objects": _w("שלך", "שלכם", "הנמען", "השולח", "הפרויקט", "החברה", "הצוות", "הלקוח", "הפגישה", "האירוע"),
        "here": _w("כאן"),
        "roles": _w("אחראי", "אחראית", "נמען", "שולח", "מועד"),
        "greetings": _w("שלום", "היי", "יקר", "יקרה"),
    },
    # Chinese and Japanese: matched on characters (see the module docstring)
    "zh": {
        "alone": _w("姓名", "名字", "日期", "时间", "地点", "地址", "邮箱", "电话", "链接", "网址", "签名", "公司"),
        "heads": _w("姓名", "名字", "名称", "名", "日期", "时间", "地点", "地址", "邮箱", "电话", "号码", "链接"),
        "possessives": _w("您的", "你的", "贵", "我方", "你们的"),
        "nouns": _w(
            "目标",
            "任务",
            "主题",
            "话题",
            "团队",
            "队伍",
            "项目",
            "角色",
            "消息",
            "代理",
            "智能体",
            "用户",
            "成员",
            "队友",
        ),
        "world": _w("房间", "位置"),
        "current": _w(
            "当前", "当前的", "目前", "目前的", "现在的", "你当前的", "您当前的", "你目前的", "您目前的", "你现在的"
        ),
        "verbs": _w("插入", "填写", "输入", "填入", "添加", "粘贴"),
        "asked": _w("链接", "目标", "内容"),
        "here": _w("在此", "此处", "这里", "在这里"),
        "roles": _w("负责人", "收件人", "发件人", "联系人", "截止日期", "经办人"),
        "not": _w(
            "报名", "排名", "点名", "提名", "莫名", "闻名", "有名", "无名", "著名", "匿名", "命名", "知名", "同名"
        ),
        "honorifics": _w("先生", "女士", "小姐", "老师", "同学", "各位", "您好"),
    },
    "ja": {
        "alone": _w("氏名", "名前", "日時", "日付", "時間", "場所", "住所", "会場", "連絡先", "宛先", "署名", "締切"),
        "heads": _w(
            *("氏名", "名前", "名", "日時", "日付", "時間", "場所", "住所", "番号", "リンク", "アドレス"),
            *("メールアドレス", "期限", "締切", "締め切り", "連絡先"),
        ),
        "possessives": _w("お", "ご", "御", "貴社", "貴方の", "あなたの"),
        "nouns": _w(
            *(
                "目標",
                "目的",
                "タスク",
                "任務",
                "課題",
                "テーマ",
                "トピック",
                "チーム",
                "プロジェクト",
                "役割",
                "メッセージ",
                "エージェント",
                "ユーザー",
            ),
            *("メンバー",),
        ),
        "world": _w("部屋", "ルーム", "位置"),
        "current": _w("現在の", "今の", "現行の"),
        "verbs": _w("挿入", "入力", "記入", "追加", "貼り付け", "を挿入", "を入力", "を記入", "を追加"),
        "asked": _w("リンク", "目標", "内容", "url", "URL"),
        "here": _w("ここに", "こちらに", "ここへ"),
        "roles": _w("担当者", "担当", "宛先", "差出人", "責任者", "締切"),
        "not": _w("有名", "無名", "著名", "匿名", "指名", "命名", "改名", "除名", "同名"),
        "honorifics": _w("様", "さん", "殿", "御中", "各位", "先生", "君", "くん", "ちゃん", "さま"),
    },
}
# Korean honorifics and particles written right after a slot (``[이름]님``, ``[장소]에서``)
KOREAN_AFTER = frozenset(("님", "씨", "께", "께서", "귀하", "귀중", "여러분", "선생님"))


def union(part: str, languages: Mapping[str, Mapping[str, frozenset[str]]] = SLOT_WORDS) -> frozenset[str]:
    """Every language's words of one part."""
    out: set[str] = set()
    for table in languages.values():
        out |= table.get(part, frozenset())
    return frozenset(out)
